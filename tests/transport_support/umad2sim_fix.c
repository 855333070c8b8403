/*
 * Two LD_PRELOAD shims around libumad2sim (ibsim 0.10) for the SA tests,
 * built from this one file:
 *
 *   LD_PRELOAD="fix_front.so libumad2sim.so fix_back.so"
 *
 * 1. umad2sim hands its client only the first 224 bytes of each MAD it
 *    receives: its receive thread copies a MAD into a buffer sized for an
 *    ibsim request (288 bytes) less the 64-byte umad header, while the
 *    length it reports is the whole 256. Bytes 224-255 come out of the
 *    heap, and for SA MADs that is the last 32 bytes of the data area
 *    (every RMPP segment, the last record of a full GetTableResp). The back
 *    half (-DFIX_BACK) sees umad2sim's own read of each ibsim request and
 *    keeps the MAD's last 32 bytes, keyed by its first 48 (header, RMPP
 *    header with the segment number, SM_Key); the front half (-DFIX_FRONT)
 *    puts them back when the client reads that MAD.
 *
 * 2. With SMLID_OVERRIDE set, the front half answers libibumad's read of a
 *    port's sysfs `sm_lid` with that LID, so a client (saquery, ibsm sa)
 *    sends its SA queries to that SM, a standby's SA included.
 *
 * Nothing else changes: every other call goes on to umad2sim and libc.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <unistd.h>

#define MAD_LEN 256
#define KEPT 224 /* what umad2sim copies */
#define KEY_LEN 48
#define UMAD_HDR 64 /* sizeof(struct ib_user_mad) */
#define SIM_REQ_MAD 32 /* offset of mad[] in ibsim's struct sim_request */
#define SIM_REQ_LEN (SIM_REQ_MAD + MAD_LEN)
#define SA_CLASS 0x03 /* only SA MADs carry data past byte 224 here */

#ifdef FIX_BACK

#define SLOTS 4096
static struct { uint8_t key[KEY_LEN]; uint8_t tail[MAD_LEN - KEPT]; int used; } ring[SLOTS];
static unsigned next_slot;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* umad2sim's receive thread reads whole ibsim requests from its socket. */
ssize_t read(int fd, void *buf, size_t count)
{
	static ssize_t (*next_read)(int, void *, size_t);
	if (!next_read)
		next_read = (ssize_t (*)(int, void *, size_t))dlsym(RTLD_NEXT, "read");
	ssize_t n = next_read(fd, buf, count);
	if (count == SIM_REQ_LEN && n == SIM_REQ_LEN && ((const uint8_t *)buf)[SIM_REQ_MAD + 1] == SA_CLASS) {
		const uint8_t *mad = (const uint8_t *)buf + SIM_REQ_MAD;
		pthread_mutex_lock(&lock);
		unsigned i = next_slot++ % SLOTS;
		memcpy(ring[i].key, mad, KEY_LEN);
		memcpy(ring[i].tail, mad + KEPT, MAD_LEN - KEPT);
		ring[i].used = 1;
		pthread_mutex_unlock(&lock);
	}
	return n;
}

/* The kept tail of the latest MAD that began with `key`; 0 if none. */
int umad2sim_fix_tail(const uint8_t *key, uint8_t *tail)
{
	int found = 0;
	pthread_mutex_lock(&lock);
	for (unsigned k = 0; k < SLOTS && !found; k++) {
		unsigned i = (next_slot - 1 - k) % SLOTS;
		if (ring[i].used && memcmp(ring[i].key, key, KEY_LEN) == 0) {
			memcpy(tail, ring[i].tail, MAD_LEN - KEPT);
			found = 1;
		}
	}
	pthread_mutex_unlock(&lock);
	return found;
}

#endif

#ifdef FIX_FRONT

static int ends_with(const char *s, const char *tail)
{
	size_t n = strlen(s), m = strlen(tail);
	return n >= m && strcmp(s + n - m, tail) == 0;
}

int open(const char *path, int flags, ...)
{
	static int (*next_open)(const char *, int, ...);
	mode_t mode = 0;
	const char *lid = getenv("SMLID_OVERRIDE");

	if (!next_open)
		next_open = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, "open");
	if (flags & O_CREAT) {
		va_list ap;
		va_start(ap, flags);
		mode = va_arg(ap, mode_t);
		va_end(ap);
	}
	if (lid && strstr(path, "/sys/class/infiniband/") && ends_with(path, "/sm_lid")) {
		int fd = memfd_create("sm_lid", 0);
		if (fd >= 0) {
			dprintf(fd, "%s\n", lid);
			lseek(fd, 0, SEEK_SET);
			return fd;
		}
	}
	return next_open(path, flags, mode);
}

/* A client reads a MAD from a umad2sim descriptor (1024-2047). */
ssize_t read(int fd, void *buf, size_t count)
{
	static ssize_t (*next_read)(int, void *, size_t);
	static int (*fix_tail)(const uint8_t *, uint8_t *);
	if (!next_read)
		next_read = (ssize_t (*)(int, void *, size_t))dlsym(RTLD_NEXT, "read");
	ssize_t n = next_read(fd, buf, count);
	if (fd >= 1024 && fd < 2048 && n >= UMAD_HDR + MAD_LEN && ((uint8_t *)buf)[UMAD_HDR + 1] == SA_CLASS) {
		if (!fix_tail)
			fix_tail = (int (*)(const uint8_t *, uint8_t *))dlsym(RTLD_DEFAULT, "umad2sim_fix_tail");
		uint8_t *mad = (uint8_t *)buf + UMAD_HDR;
		if (fix_tail)
			fix_tail(mad, mad + KEPT);
	}
	return n;
}

#endif
