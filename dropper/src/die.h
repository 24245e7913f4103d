/* Fatal errors of the loader: every file of it reports through die(), none needs the command line's file. */
#ifndef FECDROP_DIE_H
#define FECDROP_DIE_H

/* Print "fecdrop: error: ..." on stderr and exit: 2 for a user error, 1 for anything else. */
void die(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));

#endif
