/* SPDX-License-Identifier: MIT */
/* session_int.h: what the tests reach inside a session and the public API
 * (include/cicheck/cicheck.h) does not show; not exported from
 * libcicheck.so (cicheck.map). */
#ifndef CIC_SESSION_INT_H
#define CIC_SESSION_INT_H

#include "cicheck/cicheck.h"

#include "base/rt.h"

/* The runtime context s's runs use (base/rt.h): set its slice mode before
 * a run, read its counters after. NULL for NULL. */
cic_rt *_cic_session_rt(cic_session *s);

#endif
