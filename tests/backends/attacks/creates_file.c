/* Creates the file PATH and writes to it. */
#include <fcntl.h>
#include <unistd.h>

void kernel(const float *x, float *y) {
    int fd = open(PATH, O_CREAT | O_WRONLY, 0644);
    if (fd >= 0) (void)!write(fd, "x", 1);
    for (int i = 0; i < N; i++) y[i] = x[i];
}
