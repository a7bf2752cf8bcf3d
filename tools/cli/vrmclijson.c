/*
 * vrmclijson.c: the JSON objects virt-rdma prints (docs/json.rst)
 */
#include <config.h>

#include "vrmclijson.h"

JsonBuilder *
vrmCliJsonNew(void)
{
    JsonBuilder *b = json_builder_new();

    json_builder_begin_object(b);
    vrmCliJsonUInt(b, "format-version", VRM_CLI_JSON_FORMAT_VERSION);
    return b;
}

/* json-glib writes the bytes it is given: text from a peer or from libvirt
 * may not be UTF-8, and JSON must be (invalid bytes become U+FFFD) */
void
vrmCliJsonString(JsonBuilder *b, const char *key, const char *str)
{
    g_autofree char *valid = NULL;

    if (key)
        json_builder_set_member_name(b, key);
    if (!str) {
        json_builder_add_null_value(b);
        return;
    }
    valid = g_utf8_make_valid(str, -1);
    json_builder_add_string_value(b, valid);
}

/* json-glib's integers are 64-bit signed: a larger value (only ever one of
 * libvirt's "unlimited" sizes) is written as a number in exponent form */
void
vrmCliJsonUInt(JsonBuilder *b, const char *key, unsigned long long value)
{
    if (key)
        json_builder_set_member_name(b, key);
    if (value > G_MAXINT64)
        json_builder_add_double_value(b, (double)value);
    else
        json_builder_add_int_value(b, (gint64)value);
}

void
vrmCliJsonInt(JsonBuilder *b, const char *key, long long value)
{
    if (key)
        json_builder_set_member_name(b, key);
    json_builder_add_int_value(b, value);
}

void
vrmCliJsonBool(JsonBuilder *b, const char *key, bool value)
{
    if (key)
        json_builder_set_member_name(b, key);
    json_builder_add_boolean_value(b, value);
}

void
vrmCliJsonNull(JsonBuilder *b, const char *key)
{
    if (key)
        json_builder_set_member_name(b, key);
    json_builder_add_null_value(b);
}

void
vrmCliJsonReason(JsonBuilder *b, const char *key, const char *code,
                 const char *message)
{
    if (!message) {
        vrmCliJsonNull(b, key);
        return;
    }
    if (key)
        json_builder_set_member_name(b, key);
    json_builder_begin_object(b);
    vrmCliJsonString(b, "code", code);
    vrmCliJsonString(b, "message", message);
    json_builder_end_object(b);
}

char *
vrmCliJsonFinish(JsonBuilder *b)
{
    g_autoptr(JsonGenerator) gen = json_generator_new();
    g_autoptr(JsonNode) root = NULL;
    g_autofree char *text = NULL;

    json_builder_end_object(b);
    root = json_builder_get_root(b);
    json_generator_set_root(gen, root);
    text = json_generator_to_data(gen, NULL);
    g_object_unref(b);
    return g_strconcat(text, "\n", NULL);
}
