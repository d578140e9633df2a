/* chat_opt.h — the --chat-template option of llama-cli and llama-server: the name of one of text/chat.h's
 * template families. */
#ifndef BITNET_TOOL_CHAT_OPT_H
#define BITNET_TOOL_CHAT_OPT_H

#include "tools/common/args.h"

/* BITNET_ARG_CALL callback: *(const char **)opt->dst = v when v names a family (bitnet_chat_family_parse);
 * else "--chat-template expects one of bitnet, llama3, falcon3, got 'v'" and BITNET_EXIT_USAGE. */
int bitnet_tool_chat_template_arg(const bitnet_args *args, const bitnet_arg_opt *opt, const char *flag, const char *v);

/* The option's table row. */
#define BITNET_OPT_CHAT_TEMPLATE(dst_)                                                                   \
    BITNET_OPT("--chat-template", "NAME",                                                               \
               "bitnet|llama3|falcon3: chat template when the model's\n"                                \
               "tokenizer.chat_template is missing or not a known one",                                 \
               BITNET_ARG_CALL, (dst_), .fn = bitnet_tool_chat_template_arg)

#endif
