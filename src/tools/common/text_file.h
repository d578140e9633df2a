/* text_file.h — a whole text file into memory for the tools that read one (llama-cli -f, llama-perplexity
 * -f), with the one trailing newline dropped as llama.cpp's tools do. */
#ifndef BITNET_TOOL_TEXT_FILE_H
#define BITNET_TOOL_TEXT_FILE_H

#include <stddef.h>

/* The bytes of `path` as a NUL-terminated string (*len bytes, one trailing '\n' dropped; the text may
 * contain NUL bytes), to be freed by the caller. NULL on failure after printing
 * "<tool>: error: cannot open <what> '<path>': <reason>", "... cannot read <what> '<path>': <reason>"
 * or "... out of memory reading '<path>'" on stderr. */
char *bitnet_tool_read_text(const char *tool, const char *what, const char *path, size_t *len);

#endif
