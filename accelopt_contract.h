void kernel(const float *, const float *, const float *, const float *, float *);
