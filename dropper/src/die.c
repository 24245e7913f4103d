/* die(): the loader's one way to fail (die.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "die.h"

void die(int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "fecdrop: error: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(code);
}
