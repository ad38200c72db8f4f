/* SPDX-License-Identifier: MIT */
/* toml_capi.cpp: the only C++ in cicheck. Wraps toml++ 3.x (linked as the
 * Debian shared library, exceptions enabled) behind the C API of
 * toml_capi.h for the case loader.
 *
 * At parse time the toml++ tree is mirrored into a flat deque of handle
 * records, built iteratively (no recursion, so a pathological nesting depth
 * cannot overflow the stack here), with each table's keys sorted by source
 * position. Every entry point catches every exception, including (...), and
 * turns it into a status: nothing C++ leaks into the C callers. */
#include "toml_capi.h"

#include <toml++/toml.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <new>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace {

struct entry {
    const char *key;
    size_t key_len;
    int line;
    int column;
    cic_toml_node *value;
};

} // namespace

struct cic_toml_node {
    const toml::node *n = nullptr;
    std::vector<entry> entries;          // tables: keys in source order
    std::vector<cic_toml_node *> elems;  // arrays
};

struct cic_toml_doc {
    toml::table tbl;
    std::deque<cic_toml_node> nodes; // deque: element addresses are stable
    cic_toml_node *root = nullptr;
};

namespace {

int clamp_pos(toml::source_index v)
{
    return v > 0x7fffffffu ? 0x7fffffff : (int)v;
}

void set_err(cic_toml_error *err, int line, int column, const char *msg)
{
    if (!err)
        return;
    err->line = line;
    err->column = column;
    std::snprintf(err->msg, sizeof err->msg, "%s", msg ? msg : "");
}

void set_err(cic_toml_error *err, int line, int column, std::string_view msg)
{
    if (!err)
        return;
    err->line = line;
    err->column = column;
    size_t n = std::min(msg.size(), sizeof err->msg - 1);
    std::memcpy(err->msg, msg.data(), n);
    err->msg[n] = '\0';
    // Descriptions are printed in diagnostics: no stray NULs mid-message.
    for (size_t i = 0; i < n; i++)
        if (err->msg[i] == '\0')
            err->msg[i] = '?';
}

// toml++ bounds nested *values* (TOML_MAX_NESTED_VALUES) but not the
// number of parts of a dotted key or table header, and it recurses over the
// resulting table depth: "[a.a.a...]" with ~50k parts overflows the stack
// inside the library. So, before parsing, refuse any run of more than
// max_key_dots dots outside strings and comments that no separator (= , [ ]
// { } or newline) interrupts. Only a dotted key can produce such a run (a
// float or a time holds one dot), so valid documents with sane keys pass.
constexpr int max_key_dots = 16;

bool prescan_ok(const char *t, size_t len, int *line, int *col)
{
    int l = 1, c = 1, dots = 0;
    size_t i = 0;
    auto adv = [&](size_t k) {
        for (; k > 0 && i < len; k--, i++) {
            if (t[i] == '\n') {
                l++;
                c = 1;
            } else {
                c++;
            }
        }
    };
    auto at = [&](size_t j, const char *lit) {
        size_t n = std::strlen(lit);
        return j + n <= len && std::memcmp(t + j, lit, n) == 0;
    };
    while (i < len) {
        char ch = t[i];
        if (ch == '#') {
            while (i < len && t[i] != '\n')
                adv(1);
        } else if (at(i, "\"\"\"") || at(i, "'''")) {
            const char *q = ch == '"' ? "\"\"\"" : "'''";
            adv(3);
            while (i < len && !at(i, q))
                adv(ch == '"' && t[i] == '\\' ? 2 : 1);
            adv(3);
            while (i < len && t[i] == ch) // up to two quotes may end it
                adv(1);
            dots = 0;
        } else if (ch == '"' || ch == '\'') {
            adv(1);
            while (i < len && t[i] != ch && t[i] != '\n')
                adv(ch == '"' && t[i] == '\\' ? 2 : 1);
            adv(1);
        } else if (ch == '.') {
            if (++dots > max_key_dots) {
                *line = l;
                *col = c;
                return false;
            }
            adv(1);
        } else {
            if (ch == '=' || ch == ',' || ch == '[' || ch == ']' || ch == '{' ||
                ch == '}' || ch == '\n')
                dots = 0;
            adv(1);
        }
    }
    return true;
}

// Mirror the toml++ tree below doc->tbl into doc->nodes, breadth first.
void build(cic_toml_doc *doc)
{
    doc->nodes.emplace_back();
    doc->root = &doc->nodes.back();
    doc->root->n = &doc->tbl;
    std::vector<cic_toml_node *> work{doc->root};
    while (!work.empty()) {
        cic_toml_node *w = work.back();
        work.pop_back();
        if (const toml::table *t = w->n->as_table()) {
            w->entries.reserve(t->size());
            for (auto &&kv : *t) {
                doc->nodes.emplace_back();
                cic_toml_node *c = &doc->nodes.back();
                c->n = &kv.second;
                const auto &src = kv.first.source();
                w->entries.push_back(entry{kv.first.str().data(),
                                           kv.first.str().size(),
                                           clamp_pos(src.begin.line),
                                           clamp_pos(src.begin.column), c});
                work.push_back(c);
            }
            std::stable_sort(w->entries.begin(), w->entries.end(),
                             [](const entry &a, const entry &b) {
                                 return a.line != b.line ? a.line < b.line
                                                         : a.column < b.column;
                             });
        } else if (const toml::array *a = w->n->as_array()) {
            w->elems.reserve(a->size());
            for (const toml::node &e : *a) {
                doc->nodes.emplace_back();
                cic_toml_node *c = &doc->nodes.back();
                c->n = &e;
                w->elems.push_back(c);
                work.push_back(c);
            }
        }
    }
}

} // namespace

extern "C" {

int cic_toml_parse_string(cic_toml_doc **out, const char *text, size_t len,
                          const char *source_path, cic_toml_error *err)
{
    cic_toml_doc *doc = nullptr;
    if (out)
        *out = nullptr;
    if (!out || (!text && len)) {
        set_err(err, 0, 0, "internal: NULL argument");
        return CIC_TOML_ETYPE;
    }
    try {
        int pl = 0, pc = 0;
        if (!prescan_ok(text ? text : "", text ? len : 0, &pl, &pc)) {
            char m[128];
            std::snprintf(m, sizeof m,
                          "a dotted key or table name has more than %d parts",
                          max_key_dots + 1);
            set_err(err, pl, pc, m);
            return CIC_TOML_ESYNTAX;
        }
        doc = new cic_toml_doc();
        std::string_view sv(text ? text : "", text ? len : 0);
        std::string_view path(source_path ? source_path : "");
        doc->tbl = toml::parse(sv, path);
        build(doc);
        *out = doc;
        return CIC_TOML_OK;
    } catch (const toml::parse_error &e) {
        const auto &src = e.source();
        set_err(err, clamp_pos(src.begin.line), clamp_pos(src.begin.column),
                e.description());
        delete doc;
        return CIC_TOML_ESYNTAX;
    } catch (const std::bad_alloc &) {
        set_err(err, 0, 0, "out of memory while parsing");
        delete doc;
        return CIC_TOML_ENOMEM;
    } catch (const std::exception &e) {
        set_err(err, 0, 0, e.what());
        delete doc;
        return CIC_TOML_ENOMEM;
    } catch (...) {
        set_err(err, 0, 0, "unknown error while parsing");
        delete doc;
        return CIC_TOML_ENOMEM;
    }
}

int cic_toml_parse_file(cic_toml_doc **out, const char *path,
                        cic_toml_error *err)
{
    if (out)
        *out = nullptr;
    if (!out || !path) {
        set_err(err, 0, 0, "internal: NULL argument");
        return CIC_TOML_ETYPE;
    }
    try {
        std::string text;
        FILE *f = std::fopen(path, "rb");
        if (!f) {
            std::string m = std::string("cannot open: ") + std::strerror(errno);
            set_err(err, 0, 0, m.c_str());
            return CIC_TOML_EIO;
        }
        char buf[65536];
        size_t got;
        bool bad = false;
        try {
            while ((got = std::fread(buf, 1, sizeof buf, f)) > 0)
                text.append(buf, got);
        } catch (...) {
            std::fclose(f);
            throw;
        }
        bad = std::ferror(f) != 0;
        std::fclose(f);
        if (bad) {
            set_err(err, 0, 0, "read error");
            return CIC_TOML_EIO;
        }
        return cic_toml_parse_string(out, text.data(), text.size(), path, err);
    } catch (const std::bad_alloc &) {
        set_err(err, 0, 0, "out of memory while reading");
        return CIC_TOML_ENOMEM;
    } catch (...) {
        set_err(err, 0, 0, "unknown error while reading");
        return CIC_TOML_ENOMEM;
    }
}

void cic_toml_doc_free(cic_toml_doc *doc)
{
    try {
        delete doc;
    } catch (...) {
        // Destructors of the standard containers do not throw; nothing to do.
    }
}

const cic_toml_node *cic_toml_doc_root(const cic_toml_doc *doc)
{
    return doc ? doc->root : nullptr;
}

enum cic_toml_type cic_toml_node_type(const cic_toml_node *n)
{
    if (!n || !n->n)
        return CIC_TOML_NONE;
    switch (n->n->type()) {
    case toml::node_type::table: return CIC_TOML_TABLE;
    case toml::node_type::array: return CIC_TOML_ARRAY;
    case toml::node_type::string: return CIC_TOML_STRING;
    case toml::node_type::integer: return CIC_TOML_INTEGER;
    case toml::node_type::floating_point: return CIC_TOML_FLOAT;
    case toml::node_type::boolean: return CIC_TOML_BOOL;
    case toml::node_type::date: return CIC_TOML_DATE;
    case toml::node_type::time: return CIC_TOML_TIME;
    case toml::node_type::date_time: return CIC_TOML_DATETIME;
    default: return CIC_TOML_NONE;
    }
}

const char *cic_toml_type_name(enum cic_toml_type t)
{
    switch (t) {
    case CIC_TOML_TABLE: return "table";
    case CIC_TOML_ARRAY: return "array";
    case CIC_TOML_STRING: return "string";
    case CIC_TOML_INTEGER: return "integer";
    case CIC_TOML_FLOAT: return "float";
    case CIC_TOML_BOOL: return "boolean";
    case CIC_TOML_DATE: return "date";
    case CIC_TOML_TIME: return "time";
    case CIC_TOML_DATETIME: return "date-time";
    default: return "nothing";
    }
}

void cic_toml_node_pos(const cic_toml_node *n, int *line, int *column)
{
    int l = 0, c = 0;
    if (n && n->n) {
        const auto &src = n->n->source();
        l = clamp_pos(src.begin.line);
        c = clamp_pos(src.begin.column);
    }
    if (line)
        *line = l;
    if (column)
        *column = c;
}

size_t cic_toml_table_size(const cic_toml_node *n)
{
    return cic_toml_node_type(n) == CIC_TOML_TABLE ? n->entries.size() : 0;
}

int cic_toml_table_entry(const cic_toml_node *n, size_t i, const char **key,
                         size_t *key_len, const cic_toml_node **value,
                         int *key_line, int *key_column)
{
    if (cic_toml_node_type(n) != CIC_TOML_TABLE)
        return CIC_TOML_ETYPE;
    if (i >= n->entries.size())
        return CIC_TOML_ERANGE;
    const entry &e = n->entries[i];
    if (key)
        *key = e.key;
    if (key_len)
        *key_len = e.key_len;
    if (value)
        *value = e.value;
    if (key_line)
        *key_line = e.line;
    if (key_column)
        *key_column = e.column;
    return CIC_TOML_OK;
}

const cic_toml_node *cic_toml_table_get(const cic_toml_node *n,
                                        const char *key)
{
    if (cic_toml_node_type(n) != CIC_TOML_TABLE || !key)
        return nullptr;
    size_t kl = std::strlen(key);
    for (const entry &e : n->entries)
        if (e.key_len == kl && std::memcmp(e.key, key, kl) == 0)
            return e.value;
    return nullptr;
}

size_t cic_toml_array_size(const cic_toml_node *n)
{
    return cic_toml_node_type(n) == CIC_TOML_ARRAY ? n->elems.size() : 0;
}

const cic_toml_node *cic_toml_array_at(const cic_toml_node *n, size_t i)
{
    if (cic_toml_node_type(n) != CIC_TOML_ARRAY || i >= n->elems.size())
        return nullptr;
    return n->elems[i];
}

bool cic_toml_is_array_of_tables(const cic_toml_node *n)
{
    if (cic_toml_node_type(n) != CIC_TOML_ARRAY || n->elems.empty())
        return false;
    for (const cic_toml_node *e : n->elems)
        if (cic_toml_node_type(e) != CIC_TOML_TABLE)
            return false;
    return true;
}

int cic_toml_get_string(const cic_toml_node *n, const char **out, size_t *len)
{
    if (cic_toml_node_type(n) != CIC_TOML_STRING)
        return CIC_TOML_ETYPE;
    const std::string &s = n->n->as_string()->get();
    if (out)
        *out = s.c_str();
    if (len)
        *len = s.size();
    return CIC_TOML_OK;
}

int cic_toml_get_int(const cic_toml_node *n, int64_t *out)
{
    if (cic_toml_node_type(n) != CIC_TOML_INTEGER)
        return CIC_TOML_ETYPE;
    if (out)
        *out = n->n->as_integer()->get();
    return CIC_TOML_OK;
}

int cic_toml_get_float(const cic_toml_node *n, double *out)
{
    if (cic_toml_node_type(n) != CIC_TOML_FLOAT)
        return CIC_TOML_ETYPE;
    if (out)
        *out = n->n->as_floating_point()->get();
    return CIC_TOML_OK;
}

int cic_toml_get_number(const cic_toml_node *n, double *out)
{
    if (cic_toml_node_type(n) == CIC_TOML_INTEGER) {
        if (out)
            *out = (double)n->n->as_integer()->get();
        return CIC_TOML_OK;
    }
    return cic_toml_get_float(n, out);
}

int cic_toml_get_bool(const cic_toml_node *n, bool *out)
{
    if (cic_toml_node_type(n) != CIC_TOML_BOOL)
        return CIC_TOML_ETYPE;
    if (out)
        *out = n->n->as_boolean()->get();
    return CIC_TOML_OK;
}

} // extern "C"
