/*
 * vrmclijson.h: the JSON objects virt-rdma prints, written with json-glib
 *
 * Every object a command prints (capabilities, jobinfo, jobs, one per
 * event) begins with "format-version", uses kebab-case keys and gives each
 * reason as {"code": ..., "message": ...}: docs/json.rst documents them and
 * docs/virt-rdma.schema.json is their JSON Schema, which the tests apply.
 *
 * Public API summary
 * ------------------
 *   vrmCliJsonNew()                       a builder inside the top object,
 *                                         "format-version" written
 *   vrmCliJsonString(b, key, str)         a string (valid UTF-8), null if NULL
 *   vrmCliJsonUInt/Bool/Null(b, key, ...)
 *   vrmCliJsonReason(b, key, code, msg)   {"code","message"}, null if !msg
 *   vrmCliJsonFinish(b)                   the object on one line, "\n" ended
 */
#pragma once

#include <stdbool.h>

#include <json-glib/json-glib.h>

/* Goes up when a key is removed or changes meaning (new keys do not) */
#define VRM_CLI_JSON_FORMAT_VERSION 1

JsonBuilder *vrmCliJsonNew(void);
void vrmCliJsonString(JsonBuilder *b, const char *key, const char *str);
void vrmCliJsonUInt(JsonBuilder *b, const char *key, unsigned long long value);
void vrmCliJsonInt(JsonBuilder *b, const char *key, long long value);
void vrmCliJsonBool(JsonBuilder *b, const char *key, bool value);
void vrmCliJsonNull(JsonBuilder *b, const char *key);
void vrmCliJsonReason(JsonBuilder *b, const char *key, const char *code,
                      const char *message);
char *vrmCliJsonFinish(JsonBuilder *b);
