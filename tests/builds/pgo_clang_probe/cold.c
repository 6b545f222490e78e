int cold_path(int x) { return x > 3 ? x * 2 : x + 1; }
int cold_unused(int x) { return x - 1; }
