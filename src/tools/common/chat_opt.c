/* chat_opt.c — the --chat-template option (chat_opt.h). */
#include "tools/common/chat_opt.h"

#include "text/chat.h"

int bitnet_tool_chat_template_arg(const bitnet_args *args, const bitnet_arg_opt *opt, const char *flag, const char *v) {
    (void)flag;
    if (bitnet_chat_family_parse(v) == BITNET_CHAT_UNKNOWN)
        return bitnet_args_fail(args, "--chat-template expects one of %s, got '%s'", bitnet_chat_known_names(), v);
    *(const char **)opt->dst = v;
    return 0;
}
