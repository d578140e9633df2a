// PLACEHOLDER: tests not written yet (issue #2 work in progress).
#include <gtest/gtest.h>
