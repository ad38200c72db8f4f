/* SPDX-License-Identifier: MIT */
/* json_type.h: what readers of JSON files (baselines, shards, plots,
 * safetensors headers) say about a value of the wrong type. */
#ifndef CIC_JSON_TYPE_H
#define CIC_JSON_TYPE_H

#include <jansson.h>

/* "an object", "an array", "a string", "an integer", "a real number", "a
 * boolean", "null"; "missing" for NULL (a key that is not there). */
const char *cic_json_type_name(const json_t *v);

#endif
