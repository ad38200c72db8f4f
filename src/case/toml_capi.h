/* SPDX-License-Identifier: MIT */
/* toml_capi.h: a small C API over toml++ (C++17), so the case loader can stay
 * C11. A parsed document owns every node; node handles are borrowed pointers
 * valid until cic_toml_doc_free. No C++ exception ever crosses this API: each
 * entry point catches everything and reports an error return instead.
 *
 * Positions are 1-based line and column as toml++ reports them (0 when
 * unknown). Table keys are iterated in source order (toml++ stores them
 * sorted), so "the first error" is the first one in the file. */
#ifndef CIC_TOML_CAPI_H
#define CIC_TOML_CAPI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cic_toml_doc cic_toml_doc;   /* owns the tree */
typedef struct cic_toml_node cic_toml_node; /* borrowed: a toml::node */

enum cic_toml_type {
    CIC_TOML_NONE, /* NULL handle */
    CIC_TOML_TABLE,
    CIC_TOML_ARRAY,
    CIC_TOML_STRING,
    CIC_TOML_INTEGER,
    CIC_TOML_FLOAT,
    CIC_TOML_BOOL,
    CIC_TOML_DATE,
    CIC_TOML_TIME,
    CIC_TOML_DATETIME,
    CIC_TOML_TYPE_COUNT
};

/* Status of every call below. */
enum cic_toml_status {
    CIC_TOML_OK = 0,
    CIC_TOML_ESYNTAX = 1, /* TOML syntax error: err, line, col set */
    CIC_TOML_EIO = 2,     /* file missing or unreadable: err set, line 0 */
    CIC_TOML_ENOMEM = 3,  /* allocation failed (or any other exception) */
    CIC_TOML_ETYPE = 4,   /* node is not of the requested type (or NULL) */
    CIC_TOML_ERANGE = 5   /* index out of range */
};

/* Error detail of a failed parse. msg is toml++'s description. */
typedef struct {
    int line;
    int column;
    char msg[512];
} cic_toml_error;

/* Parse text[0 .. len) (embedded NUL bytes are passed to the parser, which
 * rejects them). source_path is used only in toml++'s own bookkeeping; it may
 * be NULL. On success *out is a new document; on failure *out is NULL and err
 * (may be NULL) says why and where. */
int cic_toml_parse_string(cic_toml_doc **out, const char *text, size_t len,
                          const char *source_path, cic_toml_error *err);
/* Parse a file. A missing or unreadable file is CIC_TOML_EIO (line 0). */
int cic_toml_parse_file(cic_toml_doc **out, const char *path,
                        cic_toml_error *err);
/* Free a document; NULL is a no-op. */
void cic_toml_doc_free(cic_toml_doc *doc);

/* Root table of a document (never NULL for a parsed document). */
const cic_toml_node *cic_toml_doc_root(const cic_toml_doc *doc);

/* Type of a node; CIC_TOML_NONE for NULL. */
enum cic_toml_type cic_toml_node_type(const cic_toml_node *n);
/* "table", "array", "string", "integer", "float", "boolean", "date", "time",
 * "date-time", or "nothing" for CIC_TOML_NONE; never NULL. */
const char *cic_toml_type_name(enum cic_toml_type t);
/* Source position of the node's start (for a [table] or [[array]] header,
 * the header's '['). 0, 0 when unknown or NULL. */
void cic_toml_node_pos(const cic_toml_node *n, int *line, int *column);

/* Tables. Number of keys (0 when n is not a table). */
size_t cic_toml_table_size(const cic_toml_node *n);
/* The i-th key in source order: key (NUL-terminated; *key_len holds its
 * byte length, keys may contain "\u0000"), its value and the key's source
 * position. Any out pointer may be NULL. CIC_TOML_ETYPE if n is not a table,
 * CIC_TOML_ERANGE if i >= size. */
int cic_toml_table_entry(const cic_toml_node *n, size_t i, const char **key,
                         size_t *key_len, const cic_toml_node **value,
                         int *key_line, int *key_column);
/* Value under key (exact match), or NULL when absent or n is not a table. */
const cic_toml_node *cic_toml_table_get(const cic_toml_node *n,
                                        const char *key);

/* Arrays (an array of tables is an array whose elements are tables).
 * Number of elements (0 when n is not an array). */
size_t cic_toml_array_size(const cic_toml_node *n);
/* Element i, or NULL when out of range or n is not an array. */
const cic_toml_node *cic_toml_array_at(const cic_toml_node *n, size_t i);
/* True if n is an array and every element is a table (an empty array is
 * not: it cannot have come from [[header]]). */
bool cic_toml_is_array_of_tables(const cic_toml_node *n);

/* Scalars, with type checks: CIC_TOML_ETYPE (and *out untouched) when the
 * node is not of that exact type. */
/* String: NUL-terminated, owned by the document; *len (may be NULL) is the
 * byte length, which is larger than strlen when the string holds U+0000. */
int cic_toml_get_string(const cic_toml_node *n, const char **out,
                        size_t *len);
int cic_toml_get_int(const cic_toml_node *n, int64_t *out);
/* Float only (an integer node is CIC_TOML_ETYPE); may be inf or nan. */
int cic_toml_get_float(const cic_toml_node *n, double *out);
/* Float or integer, converted to double (integers beyond 2^53 round). */
int cic_toml_get_number(const cic_toml_node *n, double *out);
int cic_toml_get_bool(const cic_toml_node *n, bool *out);

#ifdef __cplusplus
}
#endif

#endif
