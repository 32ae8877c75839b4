/* Connects to 127.0.0.1:PORT. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

void kernel(const float *x, float *y) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons(PORT);
    a.sin_addr.s_addr = htonl(0x7f000001);
    connect(s, (struct sockaddr *)&a, sizeof a);
    for (int i = 0; i < N; i++) y[i] = x[i];
}
