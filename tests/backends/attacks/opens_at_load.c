/* At load time (a constructor, which the object checks refuse): open /etc/passwd; what open gave
 * (a descriptor, or minus errno) comes back in y[0]. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>

static int opened;
__attribute__((constructor)) static void at_load(void) {
    int fd = open("/etc/passwd", O_RDONLY);
    opened = fd < 0 ? -errno : fd;
}

void kernel(const float *x, float *y) {
    for (int i = 0; i < N; i++) y[i] = x[i];
    y[0] = (float)opened;
    printf("opened %d\n", opened);
}
