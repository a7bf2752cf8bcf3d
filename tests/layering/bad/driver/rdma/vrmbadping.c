/* Two files that call each other (compiled by the negative test): refused. */
int vrmBadPong(int n);
int vrmBadPing(int n) { return n ? vrmBadPong(n - 1) : 0; }
