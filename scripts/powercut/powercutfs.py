#!/usr/bin/python3
"""A file system that loses what was not synced, as a power cut does: bookcache's power-loss harness.

    powercutfs.py BACKING MOUNTPOINT CUTFILE

Mounts BACKING at MOUNTPOINT over FUSE (Debian's python3-fusepy; root and /dev/fuse). Data written to
a file is kept in this process's memory, not in BACKING, until the file is fsynced (or fdatasynced):
then it is written to BACKING and synced there. Reads see the written data, as they would from a
kernel's page cache. Everything else — creating, renaming, linking, removing, chmod — reaches BACKING at
once, as in LazyFS (the tool Jepsen uses to test etcd and PostgreSQL for power loss): only unsynced
data is at risk, so a name can survive a cut that its content did not, which is what a journaling
file system in data=writeback mode (or ext4's delayed allocation) leaves after a crash.

When MOUNTPOINT is unmounted, the cut named in CUTFILE (read then) is applied to the unsynced data:
- `drop`: all of it is lost (LazyFS's clear-cache): files read back as they were last synced.
- `torn SEED`: each unsynced write is kept or lost at random, and a kept one may keep only its first
  pages (LazyFS's torn-op and torn-seq): a later piece of a file can survive while an earlier one is
  lost, reading back as zeros.
- `keep` (or no CUTFILE): all of it is written, as the kernel's writeback would on a clean shutdown.
So a harness kills the program under test (kill -9), writes the cut, unmounts, and mounts again to look.
"""
import errno
import os
import random
import sys

import fusepy

PAGE = 4096


class Pending:
    """The unsynced changes to one file (an inode of BACKING), in the order they were made."""

    def __init__(self, size):
        self.ops = []  # ("w", offset, bytes) or ("t", length)
        self.size = size


class PowerCutFS(fusepy.Operations):
    use_ns = True

    def __init__(self, backing, cutfile):
        self.backing = os.path.realpath(backing)
        self.cutfile = cutfile
        self.pending = {}  # st_ino -> Pending

    def _path(self, path):
        return self.backing + path

    def _ino(self, fh):
        return os.fstat(fh).st_ino

    # Data: kept in memory until fsync.

    def open(self, path, flags):
        # The kernel gives every write its offset and sends O_TRUNC as a truncate of its own.
        flags &= ~(os.O_APPEND | os.O_TRUNC | os.O_WRONLY | os.O_RDONLY | os.O_RDWR)
        return os.open(self._path(path), flags | os.O_RDWR)

    def create(self, path, mode, fi=None):
        fd = os.open(self._path(path), os.O_RDWR | os.O_CREAT | os.O_EXCL, mode)
        self.pending.pop(self._ino(fd), None)
        return fd

    def write(self, path, data, offset, fh):
        ino = self._ino(fh)
        entry = self.pending.get(ino)
        if entry is None:
            entry = self.pending[ino] = Pending(os.fstat(fh).st_size)
        entry.ops.append(("w", offset, bytes(data)))
        entry.size = max(entry.size, offset + len(data))
        return len(data)

    def truncate(self, path, length, fh=None):
        fd = fh if fh is not None else os.open(self._path(path), os.O_RDWR)
        try:
            ino = self._ino(fd)
            entry = self.pending.get(ino)
            if entry is None:
                entry = self.pending[ino] = Pending(os.fstat(fd).st_size)
            entry.ops.append(("t", length))
            entry.size = length
        finally:
            if fh is None:
                os.close(fd)

    def read(self, path, size, offset, fh):
        entry = self.pending.get(self._ino(fh))
        if entry is None:
            return os.pread(fh, size, offset)
        end = min(offset + size, entry.size)
        if end <= offset:
            return b""
        view = bytearray(os.pread(fh, end - offset, offset))
        view.extend(bytes(end - offset - len(view)))
        for op in entry.ops:
            if op[0] == "w":
                _, at, data = op
                lo, hi = max(at, offset), min(at + len(data), end)
                if lo < hi:
                    view[lo - offset : hi - offset] = data[lo - at : hi - at]
            else:
                cut = op[1]
                if cut < end:
                    start = max(cut, offset)
                    view[start - offset :] = bytes(end - start)
        return bytes(view)

    def fsync(self, path, datasync, fh):
        self._apply(fh, self.pending.pop(self._ino(fh), None), keep=lambda op: True)
        os.fsync(fh)

    def _apply(self, fd, entry, keep):
        if entry is None:
            return
        for op in entry.ops:
            if not keep(op):
                continue
            if op[0] == "w":
                _, at, data = op
                os.pwrite(fd, data, at)
            else:
                os.ftruncate(fd, op[1])

    def flush(self, path, fh):
        return 0

    def release(self, path, fh):
        os.close(fh)

    def getattr(self, path, fh=None):
        st = os.lstat(self._path(path))
        attrs = {key: getattr(st, key) for key in ("st_mode", "st_nlink", "st_uid", "st_gid", "st_size", "st_ino")}
        attrs.update(st_atime=st.st_atime_ns, st_mtime=st.st_mtime_ns, st_ctime=st.st_ctime_ns)
        entry = self.pending.get(st.st_ino)
        if entry is not None:
            attrs["st_size"] = entry.size
        return attrs

    # Names and metadata: straight to BACKING.

    def unlink(self, path):
        st = os.lstat(self._path(path))
        if st.st_nlink == 1:
            self.pending.pop(st.st_ino, None)
        os.unlink(self._path(path))

    def rename(self, old, new):
        try:
            st = os.lstat(self._path(new))
            if st.st_nlink == 1 and not os.path.isdir(self._path(new)):
                self.pending.pop(st.st_ino, None)
        except FileNotFoundError:
            pass
        os.rename(self._path(old), self._path(new))

    def link(self, target, source):
        os.link(self._path(source), self._path(target))

    def symlink(self, target, source):
        os.symlink(source, self._path(target))

    def readlink(self, path):
        return os.readlink(self._path(path))

    def mkdir(self, path, mode):
        os.mkdir(self._path(path), mode)

    def rmdir(self, path):
        os.rmdir(self._path(path))

    def readdir(self, path, fh):
        return [".", ".."] + os.listdir(self._path(path))

    def chmod(self, path, mode):
        os.chmod(self._path(path), mode)

    def chown(self, path, uid, gid):
        os.chown(self._path(path), uid, gid, follow_symlinks=False)

    def utimens(self, path, times=None):
        os.utime(self._path(path), ns=times, follow_symlinks=False)

    def access(self, path, amode):
        if not os.access(self._path(path), amode, follow_symlinks=False):
            raise fusepy.FuseOSError(errno.EACCES)

    def fsyncdir(self, path, datasync, fh):
        return 0

    def statfs(self, path):
        st = os.statvfs(self._path(path))
        return {key: getattr(st, key) for key in ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree", "f_files", "f_flag", "f_frsize", "f_namemax")}

    def destroy(self, path):
        try:
            with open(self.cutfile) as f:
                words = f.read().split()
        except OSError:
            words = ["keep"]
        rng = random.Random(int(words[1]) if len(words) > 1 else 0)
        lost = kept = 0
        for ino, entry in list(self.pending.items()):
            fd = self._open_inode(ino)
            if fd is None:
                continue
            try:
                if words[0] == "drop":
                    lost += len(entry.ops)
                    continue
                if words[0] == "torn":
                    torn = []
                    for op in entry.ops:
                        if op[0] == "w" and rng.random() < 0.5:
                            lost += 1
                            continue
                        if op[0] == "w" and len(op[2]) > PAGE and rng.random() < 0.3:
                            op = ("w", op[1], op[2][: PAGE * rng.randrange(1, (len(op[2]) + PAGE - 1) // PAGE)])
                        torn.append(op)
                    entry.ops = torn
                kept += len(entry.ops)
                self._apply(fd, entry, keep=lambda op: True)
                os.fsync(fd)
            finally:
                os.close(fd)
        sys.stderr.write(f"powercutfs: cut '{' '.join(words)}': {lost} unsynced writes lost, {kept} kept\n")

    def _open_inode(self, ino):
        """An fd for a file of BACKING by its inode (the names may have changed since it was written)."""
        for folder, _, names in os.walk(self.backing):
            for name in names:
                full = os.path.join(folder, name)
                try:
                    st = os.lstat(full)
                except FileNotFoundError:
                    continue
                if st.st_ino == ino and not os.path.islink(full):
                    return os.open(full, os.O_RDWR)
        return None


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    backing, mountpoint, cutfile = sys.argv[1:]
    fusepy.FUSE(
        PowerCutFS(backing, cutfile), mountpoint, foreground=True, nothreads=True, allow_other=True,
        attr_timeout=0, entry_timeout=0, negative_timeout=0,
    )


if __name__ == "__main__":
    main()
