/*
 * madcount: an LD_PRELOAD shim that counts the MADs a libibumad program
 * writes, by management class, method and attribute. Loaded in front of
 * libumad2sim.so so that OpenSM and ibsm are counted the same way.
 * At exit it appends "class method attr count" lines to $MADCOUNT_OUT.
 * With $MADCOUNT_LIVE it also keeps running counts of the SMPs (classes
 * 0x01 and 0x81) in that file, mapped shared: 256 methods x 64 attributes
 * of 64-bit counters, for a benchmark to read while the program runs,
 * then two times (CLOCK_MONOTONIC ns): of the last SMP written, and of the
 * first TrapRepress written since the benchmark last set that slot to 0
 * (an SM represses a trap as it takes it in: where its reaction starts).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <pthread.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <time.h>

#define LIVE_COUNTERS (256 * 64)
#define LIVE_LAST_SMP LIVE_COUNTERS
#define LIVE_FIRST_REPRESS (LIVE_COUNTERS + 1)

static ssize_t (*next_write)(int, const void *, size_t);
static unsigned long counts[256][256][64]; /* class, method, attr low 6 bits */
static unsigned long other_attr;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t *live; /* [method][attr], SMPs only */
static int live_tried;

static void open_live(void)
{
	live_tried = 1;
	const char *path = getenv("MADCOUNT_LIVE");
	if (!path)
		return;
	int fd = open(path, O_RDWR | O_CREAT, 0644);
	if (fd < 0)
		return;
	size_t len = (LIVE_COUNTERS + 2) * sizeof(uint64_t);
	if (ftruncate(fd, len) == 0) {
		void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (m != MAP_FAILED)
			live = m;
	}
	close(fd);
}

static int looks_like_mad(const uint8_t *m)
{
	return m[0] == 1 && (m[1] == 0x01 || m[1] == 0x81 || m[1] == 0x03 || m[1] == 0x04);
}

ssize_t write(int fd, const void *buf, size_t count)
{
	if (!next_write)
		next_write = dlsym(RTLD_NEXT, "write");
	const uint8_t *b = buf;
	/* The umad header is 64 bytes with the P_Key ABI, 56 without. */
	const uint8_t *mad = NULL;
	if (count >= 64 + 24 && looks_like_mad(b + 64))
		mad = b + 64;
	else if (count >= 56 + 24 && looks_like_mad(b + 56))
		mad = b + 56;
	if (mad) {
		unsigned attr = (mad[16] << 8) | mad[17];
		pthread_mutex_lock(&lock);
		if (!live_tried)
			open_live();
		if (attr < 64) {
			counts[mad[1]][mad[3]][attr]++;
			if (live && (mad[1] == 0x01 || mad[1] == 0x81)) {
				struct timespec ts;
				clock_gettime(CLOCK_MONOTONIC, &ts);
				uint64_t ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
				__atomic_add_fetch(&live[mad[3] * 64 + attr], 1, __ATOMIC_RELAXED);
				__atomic_store_n(&live[LIVE_LAST_SMP], ns, __ATOMIC_RELAXED);
				uint64_t zero = 0;
				if (mad[3] == 0x07)
					__atomic_compare_exchange_n(&live[LIVE_FIRST_REPRESS], &zero, ns, 0,
								    __ATOMIC_RELAXED, __ATOMIC_RELAXED);
			}
		} else
			other_attr++;
		pthread_mutex_unlock(&lock);
	}
	return next_write(fd, buf, count);
}

__attribute__((destructor)) static void dump(void)
{
	const char *out = getenv("MADCOUNT_OUT");
	if (!out)
		return;
	FILE *f = fopen(out, "a");
	if (!f)
		return;
	for (int c = 0; c < 256; c++)
		for (int m = 0; m < 256; m++)
			for (int a = 0; a < 64; a++)
				if (counts[c][m][a])
					fprintf(f, "%d %d %d %lu\n", c, m, a, counts[c][m][a]);
	if (other_attr)
		fprintf(f, "0 0 65535 %lu\n", other_attr);
	fclose(f);
}
