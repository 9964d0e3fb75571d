/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A shard's second tier (kvdisk.h): whether a path may be used, and what it
 * holds. The file is a customer's KV cache and is read back into a wafer:
 * whoever can write it chooses what is refilled (XXH3 is a checksum, not a
 * MAC), and whoever can read it reads the prompts' KV. So the path is
 * opened without following a link, a regular file and its directory must
 * be this user's and writable by no one else, and the file is made 0600
 * (docs/SECURITY.md). Before anything is formatted, its first MiB is read:
 * only what is blank is formatted unless the caller says otherwise, and
 * what is recognised (a file system, a partition table, swap, LUKS) is
 * named in the refusal.
 */
#define _GNU_SOURCE
#include "kvdisk_priv.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

/* "uid 65534 (nobody)" */
static const char *
who(uid_t uid, char *out, size_t cap)
{
	struct passwd pw, *res = NULL;
	char buf[1024];

	if (getpwuid_r(uid, &pw, buf, sizeof(buf), &res) == 0 && res != NULL)
		snprintf(out, cap, "uid %u (%s)", (unsigned int)uid, res->pw_name);
	else
		snprintf(out, cap, "uid %u", (unsigned int)uid);
	return out;
}

/*
 * The directory a regular file is in: this user's or root's (root can
 * write anything anyway), and writable by no one else, even with the
 * sticky bit (in /tmp, another user can create the file before kvss and
 * keep it open, or leave a link where it will be).
 */
static int
dir_check(int dfd, const char *dir, char *err, size_t errlen)
{
	struct stat st;
	char a[96], b[96];

	if (fstat(dfd, &st) != 0) {
		snprintf(err, errlen, "cannot stat its directory %s: %s", dir, strerror(errno));
		return -1;
	}
	if (st.st_uid != geteuid() && st.st_uid != 0) {
		snprintf(err, errlen, "its directory %s belongs to %s, not to this process's "
			 "%s (nor root): whoever owns it can replace the file; give a "
			 "directory of this user's (e.g. /var/lib/kvss, 0700)", dir,
			 who(st.st_uid, a, sizeof(a)), who(geteuid(), b, sizeof(b)));
		return -1;
	}
	if (st.st_mode & (S_IWGRP | S_IWOTH)) {
		snprintf(err, errlen, "its directory %s is writable by %s (mode %04o): "
			 "another user could create the file, or a link, before kvss does; "
			 "give a directory only this user can write (e.g. /var/lib/kvss, "
			 "0700)", dir,
			 (st.st_mode & S_IWOTH) ? "others" : "its group",
			 (unsigned int)(st.st_mode & 07777));
		return -1;
	}
	return 0;
}

int
kvdisk_dir_check(const char *dir, char *err, size_t errlen)
{
	int dfd, rc;

	if (dir[0] == '\0') {
		snprintf(err, errlen, "an empty name: give a directory");
		return -1;
	}
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		snprintf(err, errlen, "cannot open the directory: %s", strerror(errno));
		return -1;
	}
	rc = dir_check(dfd, dir, err, errlen);
	/* Root's directories pass dir_check: whether this user may make the file. */
	if (rc == 0 && faccessat(dfd, ".", W_OK | X_OK, AT_EACCESS) != 0) {
		snprintf(err, errlen, "cannot make a file in it: %s", strerror(errno));
		rc = -1;
	}
	close(dfd);
	return rc;
}

/* A regular file already there: this user's, writable by no one else, one link; then 0600. */
static int
file_check(int fd, const struct stat *st, char *err, size_t errlen)
{
	char a[96], b[96];

	if (st->st_uid != geteuid()) {
		snprintf(err, errlen, "belongs to %s, not to this process's %s: another "
			 "user's file is not taken (they could read the columns, or write "
			 "their own)",
			 who(st->st_uid, a, sizeof(a)), who(geteuid(), b, sizeof(b)));
		return -1;
	}
	if (st->st_mode & (S_IWGRP | S_IWOTH)) {
		snprintf(err, errlen, "writable by %s (mode %04o): its columns may have been "
			 "written by another user; remove it to start empty",
			 (st->st_mode & S_IWOTH) ? "others" : "its group",
			 (unsigned int)(st->st_mode & 07777));
		return -1;
	}
	if (st->st_nlink != 1) {
		snprintf(err, errlen, "has %lu hard links: another name could be another user's "
			 "way in; give it one name", (unsigned long)st->st_nlink);
		return -1;
	}
	/* Readable by others (0644, say) is closed now; what they read before is read. */
	if ((st->st_mode & 07777) != 0600 && fchmod(fd, 0600) != 0) {
		snprintf(err, errlen, "cannot make it 0600 (mode %04o): %s",
			 (unsigned int)(st->st_mode & 07777), strerror(errno));
		return -1;
	}
	return 0;
}

int
kd_file_open(const char *path, struct kd_file *f, char *err, size_t errlen)
{
	const int rw = O_RDWR | O_CLOEXEC | O_NONBLOCK;
	char dir[4096];
	const char *base, *slash = strrchr(path, '/');
	struct stat st;
	int dfd, rc = -1;

	memset(f, 0, sizeof(*f));
	f->fd = -1;
	if (slash == NULL) {
		snprintf(dir, sizeof(dir), ".");
		base = path;
	} else if ((size_t)(slash - path) >= sizeof(dir)) {
		snprintf(err, errlen, "its directory's name is too long");
		return -1;
	} else {
		snprintf(dir, sizeof(dir), "%.*s", slash == path ? 1 : (int)(slash - path), path);
		base = slash + 1;
	}
	if (base[0] == '\0' || strcmp(base, ".") == 0 || strcmp(base, "..") == 0) {
		snprintf(err, errlen, "names a directory, not a file or a block device");
		return -1;
	}
	/* The directory is reached as the administrator named it (links included);
	 * the file is opened in it, so that what is checked is what is used. */
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		snprintf(err, errlen, "cannot open its directory %s: %s", dir, strerror(errno));
		return -1;
	}
	f->fd = openat(dfd, base, rw | O_NOFOLLOW);
	if (f->fd < 0 && errno == ENOENT) {
		/* New: in a directory no one else can write, made 0600, never over a
		 * file that appeared meanwhile. */
		if (dir_check(dfd, dir, err, errlen) != 0)
			goto out;
		f->fd = openat(dfd, base, rw | O_NOFOLLOW | O_CREAT | O_EXCL, 0600);
		if (f->fd < 0) {
			snprintf(err, errlen, "cannot create it: %s", strerror(errno));
			goto out;
		}
		f->created = true;
	} else if (f->fd < 0 && errno == ELOOP) {
		/* A link: taken only to a block device (/dev/disk/by-id/...), whose
		 * permissions are its administrator's; a link to a file could be
		 * anyone's way to make kvss write where they choose. */
		if (fstatat(dfd, base, &st, 0) == 0 && S_ISBLK(st.st_mode))
			f->fd = openat(dfd, base, rw);
		if (f->fd < 0) {
			char to[256];
			ssize_t n = readlinkat(dfd, base, to, sizeof(to) - 1);

			to[n > 0 ? n : 0] = '\0';
			snprintf(err, errlen, "a symbolic link (to '%s'): not followed but to a "
				 "block device; name the file itself", to);
			goto out;
		}
	} else if (f->fd < 0) {
		snprintf(err, errlen, "cannot open: %s", strerror(errno));
		goto out;
	}
	if (fstat(f->fd, &st) != 0) {
		snprintf(err, errlen, "cannot stat: %s", strerror(errno));
		goto out;
	}
	f->blk = S_ISBLK(st.st_mode);
	if (!f->blk && !S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "not a regular file or a block device");
		goto out;
	}
	if (!f->blk && !f->created &&
	    (dir_check(dfd, dir, err, errlen) != 0 || file_check(f->fd, &st, err, errlen) != 0))
		goto out;
	if (f->blk && ioctl(f->fd, BLKGETSIZE64, &f->size) != 0) {
		snprintf(err, errlen, "cannot size the device: %s", strerror(errno));
		goto out;
	}
	if (!f->blk)
		f->size = (uint64_t)st.st_size;
	/* O_DIRECT where the file system takes it (tmpfs before Linux 6.6 does
	 * not: the page cache then). Set here, not at open: an open that creates
	 * the file and then refuses O_DIRECT would leave it made. */
	f->direct = fcntl(f->fd, F_SETFL, fcntl(f->fd, F_GETFL) | O_DIRECT) == 0;
	rc = 0;
out:
	close(dfd);
	if (rc != 0 && f->fd >= 0) {
		close(f->fd);
		f->fd = -1;
	}
	return rc;
}

/* Signatures at fixed places: what a blank-looking disk may well be. */
static const struct {
	uint32_t off;
	uint8_t len;
	const char *magic;
	const char *what;
} sigs[] = {
	{1080, 2, "\x53\xef", "an ext2/3/4 file system (magic 0xEF53 at byte 1080)"},
	{0, 4, "XFSB", "an XFS file system (\"XFSB\" at byte 0)"},
	{0x10040, 8, "_BHRfS_M", "a btrfs file system (\"_BHRfS_M\" at byte 65600)"},
	{1024, 4, "\x10\x20\xf5\xf2", "an F2FS file system (magic at byte 1024)"},
	{0, 6, "LUKS\xba\xbe", "a LUKS encrypted volume (\"LUKS\" at byte 0)"},
	{4086, 10, "SWAPSPACE2", "a swap area (\"SWAPSPACE2\" at byte 4086)"},
	{4086, 10, "SWAP-SPACE", "a swap area (\"SWAP-SPACE\" at byte 4086)"},
	{512, 8, "LABELONE", "an LVM physical volume (\"LABELONE\" at byte 512)"},
	{4096, 4, "\xfc\x4e\x2b\xa9", "a Linux RAID member (md superblock 1.2 at byte 4096)"},
	{0, 4, "hsqs", "a SquashFS image (\"hsqs\" at byte 0)"},
	{32769, 5, "CD001", "an ISO 9660 image (\"CD001\" at byte 32769)"},
	{3, 8, "NTFS    ", "an NTFS file system (\"NTFS\" at byte 3)"},
	{82, 5, "FAT32", "a FAT32 file system (\"FAT32\" at byte 82)"},
	{54, 3, "FAT", "a FAT file system (\"FAT\" at byte 54)"},
	/* After the file systems that have a boot sector of their own. */
	{512, 8, "EFI PART", "a GPT partition table (\"EFI PART\" at byte 512)"},
	{510, 2, "\x55\xaa", "an MBR partition table or boot sector (0x55AA at byte 510)"},
};

const char *
kd_file_content(const uint8_t *head, size_t n, char *what, size_t cap)
{
	size_t i;

	for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		if (sigs[i].off + sigs[i].len <= n &&
		    memcmp(head + sigs[i].off, sigs[i].magic, sigs[i].len) == 0) {
			snprintf(what, cap, "%s", sigs[i].what);
			return what;
		}
	for (i = 0; i < n && head[i] == 0; i++)
		;
	if (i == n)
		return NULL;
	snprintf(what, cap, "data (not blank: its first nonzero byte is at "
		 "%zu of the %zu read)", i, n);
	return what;
}
