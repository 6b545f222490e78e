/* Compiled in the optimised build only, never linked into what trained: no profile data. */
int other_function(int x) { return x * x; }
