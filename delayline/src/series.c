#include "series.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NS_PER_MS 1000000ULL
/* The largest delay a step may ask for: the delay element's own limit (control.h), 60 s. */
#define MAX_DELAY_MS 60000.0

char *dl_read_text(const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "rb");
	char *text = NULL;
	long size;

	if (!f) {
		snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
		return NULL;
	}
	if (fseek(f, 0, SEEK_END) == 0 && (size = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
	    (text = malloc((size_t)size + 1)) && fread(text, 1, (size_t)size, f) == (size_t)size) {
		text[size] = '\0';
		if (strlen(text) != (size_t)size) {
			snprintf(err, errlen, "%s: a NUL byte: not a text file", path);
			free(text);
			text = NULL;
		}
	} else {
		snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno ? errno : EIO));
		free(text);
		text = NULL;
	}
	fclose(f);
	return text;
}

void dl_series_free(struct dl_series *s)
{
	free(s->offset_ms);
	free(s->delay_ns);
	memset(s, 0, sizeof(*s));
}

/* One line, `OFFSET_MS DELAY_MS`: 0, or -1 (the caller names the line). */
static int parse_step(const char *line, size_t len, unsigned long *offset, double *delay_ms)
{
	char text[96], *end;

	if (!len || len >= sizeof(text) || line[0] < '0' || line[0] > '9')
		return -1;
	memcpy(text, line, len);
	text[len] = '\0';
	errno = 0;
	*offset = strtoul(text, &end, 10);
	if (errno || *offset > UINT32_MAX || (*end != ' ' && *end != '\t' && *end != ','))
		return -1;
	while (*end == ' ' || *end == '\t' || *end == ',')
		end++;
	*delay_ms = strtod(end, &end);
	while (*end == ' ' || *end == '\t')
		end++;
	return errno || *end || !isfinite(*delay_ms) || *delay_ms < 0 || *delay_ms > MAX_DELAY_MS ? -1 : 0;
}

int dl_series_parse(struct dl_series *s, const char *text, const char *name, char *err, size_t errlen)
{
	uint32_t cap = 0, line = 0;
	const char *p = text;

	memset(s, 0, sizeof(*s));
	while (*p) {
		const char *eol = strchr(p, '\n');
		size_t len = eol ? (size_t)(eol - p) : strlen(p);
		unsigned long offset;
		double delay_ms;

		line++;
		if (len && p[len - 1] == '\r')
			len--;
		if (parse_step(p, len, &offset, &delay_ms) < 0) {
			snprintf(err, errlen, "%s, line %u: expected 'OFFSET_MS DELAY_MS' (a whole offset, a delay of 0 to "
				 "60000 ms), got '%.*s'", name, line, (int)(len < 40 ? len : 40), p);
			goto fail;
		}
		if ((s->steps == 0 && offset != 0) || (s->steps && offset < s->offset_ms[s->steps - 1])) {
			snprintf(err, errlen, "%s, line %u: %s", name, line, s->steps ? "offsets never go back"
											 : "the first step starts at offset 0");
			goto fail;
		}
		if (s->steps == cap) {
			uint32_t grown = cap ? cap * 2 : 1024;
			uint32_t *offsets = grown <= DL_SERIES_MAX_STEPS ? realloc(s->offset_ms, grown * sizeof(*offsets)) : NULL;
			uint64_t *delays = offsets ? realloc(s->delay_ns, grown * sizeof(*delays)) : NULL;

			if (offsets)
				s->offset_ms = offsets;
			if (!delays) {
				snprintf(err, errlen, "%s: more than %u steps or out of memory", name, DL_SERIES_MAX_STEPS);
				goto fail;
			}
			s->delay_ns = delays;
			cap = grown;
		}
		s->offset_ms[s->steps] = (uint32_t)offset;
		s->delay_ns[s->steps++] = (uint64_t)llround(delay_ms * 1e6);
		p += eol ? len + (p[len] == '\r') + 1 : strlen(p);
	}
	if (s->steps < 2 || !s->offset_ms[s->steps - 1]) {
		snprintf(err, errlen, "%s: at least two lines, the last one's offset (> 0) ending the series", name);
		goto fail;
	}
	s->period_ns = (uint64_t)s->offset_ms[s->steps - 1] * NS_PER_MS;
	return 0;
fail:
	dl_series_free(s);
	return -1;
}

int dl_series_load(struct dl_series *s, const char *path, char *err, size_t errlen)
{
	char *text = dl_read_text(path, err, errlen);
	int rc;

	memset(s, 0, sizeof(*s));
	if (!text)
		return -1;
	rc = dl_series_parse(s, text, path, err, errlen);
	free(text);
	return rc;
}

void dl_series_start(struct dl_series *s, uint64_t now_ns, uint64_t offset_ns)
{
	s->base_ns = (int64_t)now_ns - (int64_t)offset_ns;
	s->offset_ns = offset_ns;
	s->started_ns = now_ns;
}

uint64_t dl_series_delay_ns(const struct dl_series *s, uint64_t at_ns)
{
	int64_t since = (int64_t)at_ns - s->base_ns;
	uint64_t within = since > 0 ? (uint64_t)since % s->period_ns : 0;
	uint32_t lo = 0, hi = s->steps - 1;

	/* the last step at or before `within`: offset[lo] <= within < offset[hi] throughout (offset[0] is 0, the
	   last line's offset is the period) */
	while (lo + 1 < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if ((uint64_t)s->offset_ms[mid] * NS_PER_MS <= within)
			lo = mid;
		else
			hi = mid;
	}
	return s->delay_ns[lo];
}

uint64_t dl_series_loops(const struct dl_series *s, uint64_t now_ns)
{
	int64_t since = (int64_t)now_ns - s->base_ns;

	return since > 0 ? (uint64_t)since / s->period_ns : 0;
}
