int vrmBadPing(int n);
int vrmBadPong(int n) { return n ? vrmBadPing(n - 1) : 1; }
