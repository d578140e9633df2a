/* PLACEHOLDER: not written yet (issue #2 work in progress). */
typedef int bitnet_placeholder_lut;
