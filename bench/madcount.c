/*
 * madcount: an LD_PRELOAD shim that counts the MADs a libibumad program
 * writes, by management class, method and attribute. Loaded in front of
 * libumad2sim.so so that OpenSM and ibsm are counted the same way.
 * At exit it appends "class method attr count" lines to $MADCOUNT_OUT.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <pthread.h>

static ssize_t (*next_write)(int, const void *, size_t);
static unsigned long counts[256][256][64]; /* class, method, attr low 6 bits */
static unsigned long other_attr;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

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
		if (attr < 64)
			counts[mad[1]][mad[3]][attr]++;
		else
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
