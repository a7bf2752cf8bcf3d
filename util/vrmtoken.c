/*
 * vrmtoken.c: the job token's one codec
 */
#include <config.h>

#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include <glib.h>

#include "vrmtoken.h"
#include "vrmerror.h"
#include "vrmi18n.h"

int
vrmTokenGenerate(vrmToken *token)
{
    size_t got = 0;

    while (got < sizeof(token->bytes)) {
        ssize_t rc = getrandom(token->bytes + got, sizeof(token->bytes) - got, 0);

        if (rc < 0) {
            if (errno == EINTR)
                continue;
            vrmReportSystemError(errno, "%s", _("cannot generate a migration token"));
            return -1;
        }
        got += rc;
    }
    return 0;
}

bool
vrmTokenParse(const char *hex, vrmToken *token)
{
    size_t i;

    if (!hex || strlen(hex) != VRM_TOKEN_HEX_LEN)
        return false;
    for (i = 0; i < VRM_TOKEN_HEX_LEN; i++) {
        if (!g_ascii_isdigit(hex[i]) && !(hex[i] >= 'a' && hex[i] <= 'f'))
            return false;
    }
    for (i = 0; i < VRM_TOKEN_BYTES; i++)
        token->bytes[i] = (g_ascii_xdigit_value(hex[2 * i]) << 4) |
            g_ascii_xdigit_value(hex[2 * i + 1]);
    return true;
}

void
vrmTokenFormat(const vrmToken *token, char hex[VRM_TOKEN_HEX_LEN + 1])
{
    static const char digits[] = "0123456789abcdef";
    size_t i;

    for (i = 0; i < VRM_TOKEN_BYTES; i++) {
        hex[2 * i] = digits[token->bytes[i] >> 4];
        hex[2 * i + 1] = digits[token->bytes[i] & 0xf];
    }
    hex[VRM_TOKEN_HEX_LEN] = '\0';
}

bool
vrmTokenEqual(const vrmToken *a, const vrmToken *b)
{
    uint8_t diff = 0;
    size_t i;

    for (i = 0; i < VRM_TOKEN_BYTES; i++)
        diff |= a->bytes[i] ^ b->bytes[i];
    return diff == 0;
}

void
vrmTokenClear(vrmToken *token)
{
    explicit_bzero(token->bytes, sizeof(token->bytes));
}
