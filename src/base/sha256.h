/* SPDX-License-Identifier: MIT */
/* sha256.h: SHA-256 (FIPS 180-4): the weight fingerprints in reference/,
 * the hashes of truths and files, and the keys of cached weight bounds
 * (specnorm.h). In base because a bound of base keys on it; model.h
 * includes this header, so its users see the same names as before. */
#ifndef CIC_SHA256_H
#define CIC_SHA256_H

#include "base.h"

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint32_t h[8];
    uint64_t len;
    unsigned char buf[64];
    size_t n;
} cic_sha256;
void cic_sha256_init(cic_sha256 *s);
void cic_sha256_update(cic_sha256 *s, const void *data, size_t len);
void cic_sha256_final(cic_sha256 *s, unsigned char out[32]);
/* The SHA-256 of len bytes as 64 hex digits. */
void cic_sha256_hex(char hex[65], const void *data, size_t len);
/* The digest of s as 64 hex digits (s is finished). */
void cic_sha256_final_hex(cic_sha256 *s, char hex[65]);
/* The SHA-256 of the whole regular file path, read in chunks (opened as
 * cic_file_open does: never a FIFO or a device), and the file's identity
 * when it was opened into *id. 0, or -1 with d set. */
int cic_sha256_file(char hex[65], cic_file_id *id, const char *path, cic_diag *d);

#endif
