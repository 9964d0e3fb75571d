/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A PNG of a few curves through gnuplot: see plot.h.
 *
 * The output file's name never enters gnuplot's script: gnuplot writes the
 * PNG on its standard output (no "set output"), into an unlinked temporary
 * file, and this code copies it to the file asked, checking every write and
 * the close. gnuplot runs without a shell (posix_spawnp), its script from
 * another unlinked temporary file. The titles do enter the script, in
 * single quotes: gnuplot substitutes neither backquotes nor escapes there.
 */
#include "plot.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* A string for gnuplot's single quotes: '' for a quote; control bytes as spaces. */
static void
quoted(FILE *f, const char *s)
{
	fputc('\'', f);
	for (; s != NULL && *s != '\0'; s++) {
		if (*s == '\'')
			fputs("''", f);
		else
			fputc((unsigned char)*s < 0x20 || *s == 0x7f ? ' ' : *s, f);
	}
	fputc('\'', f);
}

/* An unlinked temporary file open for reading and writing, or -1. */
static int
tmpfd(void)
{
	const char *dir = getenv("TMPDIR");
	char path[4096];
	int fd;

	if (dir == NULL || dir[0] == '\0' ||
	    (size_t)snprintf(path, sizeof(path), "%s/kvss_plot_XXXXXX", dir) >= sizeof(path))
		snprintf(path, sizeof(path), "/tmp/kvss_plot_XXXXXX");
	fd = mkstemp(path);
	if (fd >= 0) {
		unlink(path);
		fcntl(fd, F_SETFD, FD_CLOEXEC);
	}
	return fd;
}

/* A printable copy of @p s for a message: control bytes as '?' (plot.h). */
const char *
plot_shown(const char *s, char *buf, size_t len)
{
	size_t i;

	for (i = 0; s[i] != '\0' && i + 1 < len; i++)
		buf[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
	buf[i] = '\0';
	return buf;
}

/*
 * @p s for a POSIX shell, to paste: in single quotes ('\'' for a quote), so
 * that no backquote or $ runs anything; a control byte (a newline) as $'\n'
 * or $'\NNN', never raw. Cut short (and then without the closing quote's
 * promise) when @p len is too small: '...' with an ellipsis outside.
 */
static const char *
shell_quoted(const char *s, char *buf, size_t len)
{
	size_t o = 0;

#define PUT(str)                                                                                   \
	do {                                                                                       \
		const char *p_ = (str);                                                            \
		size_t l_ = strlen(p_);                                                            \
		if (o + l_ + 5 >= len)                                                             \
			goto cut;                                                                  \
		memcpy(buf + o, p_, l_);                                                           \
		o += l_;                                                                           \
	} while (0)
	PUT("'");
	for (; *s != '\0'; s++) {
		unsigned char c = (unsigned char)*s;
		char one[16];

		if (c == '\'')
			PUT("'\\''");
		else if (c < 0x20 || c == 0x7f) {
			if (c == '\n')
				snprintf(one, sizeof(one), "'$'\\n''");
			else if (c == '\t')
				snprintf(one, sizeof(one), "'$'\\t''");
			else
				snprintf(one, sizeof(one), "'$'\\%03o''", c);
			PUT(one);
		} else {
			one[0] = (char)c;
			one[1] = '\0';
			PUT(one);
		}
	}
	PUT("'");
#undef PUT
	buf[o] = '\0';
	return buf;
cut:
	snprintf(buf + o, len - o, "'...");
	return buf;
}

int
plot_check_output(const char *png, char *err, size_t errlen)
{
	char dir[4096], show[512];
	const char *slash;
	struct stat st;
	int e;

	if (png == NULL || png[0] == '\0') {
		snprintf(err, errlen, "an empty file name");
		return -1;
	}
	plot_shown(png, show, sizeof(show));
	/* A link, even one to nowhere, is not followed: the file written is
	 * the one named (a link placed there would choose another). */
	if (lstat(png, &st) == 0 && S_ISLNK(st.st_mode)) {
		snprintf(err, errlen, "%s is a symbolic link; name the file itself", show);
		return -1;
	}
	if (stat(png, &st) == 0) {
		/* There already: it is overwritten, wherever it is. */
		if (S_ISDIR(st.st_mode)) {
			snprintf(err, errlen, "%s is a directory; name the file to write in it", show);
			return -1;
		}
		if (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)) {
			snprintf(err, errlen, "%s is a %s, not a file to write", show,
				 S_ISFIFO(st.st_mode) ? "FIFO" : "socket");
			return -1;
		}
		if (access(png, W_OK) != 0) {
			snprintf(err, errlen, "%s cannot be written: %s", show, strerror(errno));
			return -1;
		}
		return 0;
	}
	slash = strrchr(png, '/');
	if (slash == NULL)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == png)
		snprintf(dir, sizeof(dir), "/");
	else if ((size_t)(slash - png) < sizeof(dir))
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - png), png);
	else {
		snprintf(err, errlen, "%s: the name is too long", show);
		return -1;
	}
	e = stat(dir, &st) != 0 ? errno : !S_ISDIR(st.st_mode) ? ENOTDIR : 0;
	if (e != 0) {
		char sh[1024];

		plot_shown(dir, show, sizeof(show));
		if (e == ENOENT)
			snprintf(err, errlen, "the directory %s does not exist; create it first "
				 "(mkdir -p %s)", show, shell_quoted(dir, sh, sizeof(sh)));
		else
			snprintf(err, errlen, "the directory %s: %s", show, strerror(e));
		return -1;
	}
	if (access(dir, W_OK | X_OK) != 0) {
		plot_shown(dir, show, sizeof(show));
		snprintf(err, errlen, "the directory %s is not writable: %s", show, strerror(errno));
		return -1;
	}
	return 0;
}

/* The first line of gnuplot's messages that says something (its error), into @p line. */
static void
first_words(int fd, char *line, size_t len)
{
	char buf[4096], *p, *nl;
	ssize_t n;

	line[0] = '\0';
	if (lseek(fd, 0, SEEK_SET) != 0 || (n = read(fd, buf, sizeof(buf) - 1)) <= 0)
		return;
	buf[n] = '\0';
	/* gnuplot echoes the failing line, a caret under it, then "line N: why". */
	for (p = buf; *p != '\0'; p = nl + 1) {
		nl = strchr(p, '\n');
		if (nl != NULL)
			*nl = '\0';
		while (*p == ' ' || *p == '\t' || *p == '^')
			p++;
		if (strncmp(p, "line ", 5) == 0 || strstr(p, "rror") != NULL) {
			plot_shown(p, line, len);
			return;
		}
		if (line[0] == '\0' && *p != '\0')
			plot_shown(p, line, len);
		if (nl == NULL)
			break;
	}
}

int
plot_open_output(const char *path, char *err, size_t errlen)
{
	struct stat st;
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW, 0644);

	if (fd < 0) {
		snprintf(err, errlen, "cannot create it: %s",
			 errno == ENXIO	  ? "a FIFO with no reader, or a socket: not a file"
			 : errno == ELOOP ? "a symbolic link, not followed"
					  : strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) != 0) {
		snprintf(err, errlen, "cannot write it: %s", strerror(errno));
		close(fd);
		return -1;
	}
	if (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)) {
		snprintf(err, errlen, "cannot write it: %s",
			 S_ISFIFO(st.st_mode) ? "a FIFO, not a file" : "a socket, not a file");
		close(fd);
		return -1;
	}
	if (fcntl(fd, F_SETFL, 0) != 0) {
		snprintf(err, errlen, "cannot write it: %s", strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

/* Copy @p in (from its start, @p size bytes) to the file @p png, every write checked. */
static int
copy_out(int in, off_t size, const char *png, char *err, size_t errlen)
{
	char buf[65536];
	off_t done = 0;
	int out;

	if (lseek(in, 0, SEEK_SET) != 0) {
		snprintf(err, errlen, "gnuplot's output: %s", strerror(errno));
		return -1;
	}
	out = plot_open_output(png, err, errlen);
	if (out < 0)
		return -1;
	while (done < size) {
		ssize_t n = read(in, buf, sizeof(buf)), w = 0;

		if (n <= 0) {
			snprintf(err, errlen, "gnuplot's output: %s", n < 0 ? strerror(errno) : "cut short");
			close(out);
			return -1;
		}
		while (w < n) {
			ssize_t k = write(out, buf + w, (size_t)(n - w));

			if (k < 0 && errno == EINTR)
				continue;
			if (k <= 0) {
				snprintf(err, errlen, "writing it: %s",
					 k < 0 ? strerror(errno) : "nothing written");
				close(out);
				return -1;
			}
			w += k;
		}
		done += n;
	}
	if (close(out) != 0) {
		snprintf(err, errlen, "writing it: %s", strerror(errno));
		return -1;
	}
	return 0;
}

static void
script(FILE *f, const struct plot *p, const struct plot_series *s, unsigned int n)
{
	unsigned int k;
	size_t i;

	/* No "set output": the PNG goes to gnuplot's standard output. */
	fprintf(f, "set terminal png size 960,600 noenhanced\n");
	fprintf(f, "set title ");
	quoted(f, p->title);
	fprintf(f, "\nset xlabel ");
	quoted(f, p->xlabel);
	fprintf(f, "\nset ylabel ");
	quoted(f, p->ylabel);
	fprintf(f, "\nset grid\nset key left top\n");
	if (p->logx)
		fprintf(f, "set logscale x\n");
	if (p->ymin != 0 || p->ymax != 0)
		fprintf(f, "set yrange [%g:%g]\n", p->ymin, p->ymax);
	for (k = 0; k < n; k++) {
		fprintf(f, "$d%u << EOD\n", k);
		for (i = 0; i < s[k].n; i++)
			fprintf(f, "%.9g %.9g\n", s[k].x[i], s[k].y[i]);
		fprintf(f, "EOD\n");
	}
	fprintf(f, "plot ");
	for (k = 0; k < n; k++) {
		fprintf(f, "%s$d%u using 1:2 with %s title ", k ? ", " : "", k,
			s[k].points ? "linespoints" : "lines");
		quoted(f, s[k].title);
	}
	fprintf(f, "\n");
}

int
plot_png(const struct plot *p, const struct plot_series *s, unsigned int n, char *err,
	 size_t errlen)
{
	static const unsigned char magic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
	char *const argv[] = {(char *)"gnuplot", NULL};
	posix_spawn_file_actions_t fa;
	int in = -1, out = -1, log = -1, rc = -1, st = 0, e;
	unsigned char head[8];
	char line[256];
	struct stat sb;
	FILE *f;
	pid_t pid;

	if (plot_check_output(p->png, err, errlen) != 0)
		return -1;
	in = tmpfd();
	out = tmpfd();
	log = tmpfd();
	if (in < 0 || out < 0 || log < 0) {
		snprintf(err, errlen, "a temporary file for gnuplot: %s", strerror(errno));
		goto done;
	}
	f = fdopen(dup(in), "w");
	if (f == NULL) {
		snprintf(err, errlen, "gnuplot's script: %s", strerror(errno));
		goto done;
	}
	script(f, p, s, n);
	if (fclose(f) != 0 || lseek(in, 0, SEEK_SET) != 0) {
		snprintf(err, errlen, "gnuplot's script: %s", strerror(errno));
		goto done;
	}
	if (posix_spawn_file_actions_init(&fa) != 0) {
		snprintf(err, errlen, "cannot run gnuplot: out of memory");
		goto done;
	}
	posix_spawn_file_actions_adddup2(&fa, in, 0);
	posix_spawn_file_actions_adddup2(&fa, out, 1);
	posix_spawn_file_actions_adddup2(&fa, log, 2);
	e = posix_spawnp(&pid, "gnuplot", &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (e != 0) {
		snprintf(err, errlen, "gnuplot %s", e == ENOENT
			 ? "is not installed (Debian's gnuplot-nox; scripts/deps.sh)" : strerror(e));
		goto done;
	}
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR) {
			snprintf(err, errlen, "waiting for gnuplot: %s", strerror(errno));
			goto done;
		}
	first_words(log, line, sizeof(line));
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		if (WIFEXITED(st) && WEXITSTATUS(st) == 127)
			snprintf(err, errlen, "gnuplot is not installed (Debian's gnuplot-nox; "
					      "scripts/deps.sh)");
		else
			snprintf(err, errlen, "gnuplot failed%s%s", line[0] ? ": " : "", line);
		goto done;
	}
	if (fstat(out, &sb) != 0 || sb.st_size < (off_t)sizeof(magic) ||
	    pread(out, head, sizeof(head), 0) != (ssize_t)sizeof(head) ||
	    memcmp(head, magic, sizeof(magic)) != 0) {
		snprintf(err, errlen, "gnuplot wrote no PNG%s%s", line[0] ? ": " : "", line);
		goto done;
	}
	if (copy_out(out, sb.st_size, p->png, err, errlen) != 0)
		goto done;
	rc = 0;
done:
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
	if (log >= 0)
		close(log);
	return rc;
}
