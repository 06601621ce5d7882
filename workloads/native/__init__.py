"""The native executor: a transaction as a program (opcodes, checks, Python reference) run in C (_native.c)."""
