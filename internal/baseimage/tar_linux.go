package baseimage

import (
	"archive/tar"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// emptied are directories whose content the engine provides at run time:
// the tar keeps them, empty.
var emptied = map[string]bool{"dev": true, "proc": true, "sys": true}

// writeTar writes the tree at dir to w as a tar stream, as the engine's
// import reads it: names relative to dir, numeric owners (the host's user
// names mean nothing in the image), hard links as links, symbolic links as
// they are, the content of emptied directories and sockets left out.
// Extended attributes are not kept: none of the default packages uses file
// capabilities.
func writeTar(w io.Writer, dir string) error {
	tw := tar.NewWriter(w)
	links := map[[2]uint64]string{} // (device, inode) of a file with more than one link -> its first name
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.Type()&fs.ModeSocket != 0 {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		hdr, err := tarHeader(path, rel, info, links)
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if hdr.Typeflag == tar.TypeReg && hdr.Size > 0 {
			if err := copyFile(tw, path); err != nil {
				return err
			}
		}
		if d.IsDir() && emptied[rel] {
			return filepath.SkipDir
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// tarHeader describes the file at path, named rel in the tar; links
// remembers files with several names so that their later names become hard
// links to the first.
func tarHeader(path, rel string, info fs.FileInfo, links map[[2]uint64]string) (*tar.Header, error) {
	target := ""
	if info.Mode()&fs.ModeSymlink != 0 {
		var err error
		if target, err = os.Readlink(path); err != nil {
			return nil, err
		}
	}
	hdr, err := tar.FileInfoHeader(info, target)
	if err != nil {
		return nil, err
	}
	hdr.Name = rel
	if info.IsDir() {
		hdr.Name += "/"
	}
	hdr.Uname, hdr.Gname = "", ""
	hdr.AccessTime, hdr.ChangeTime = time.Time{}, time.Time{}
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return hdr, nil
	}
	hdr.Uid, hdr.Gid = int(st.Uid), int(st.Gid)
	if info.Mode().IsRegular() && st.Nlink > 1 {
		key := [2]uint64{uint64(st.Dev), st.Ino}
		if first, seen := links[key]; seen {
			hdr.Typeflag, hdr.Linkname, hdr.Size = tar.TypeLink, first, 0
		} else {
			links[key] = rel
		}
	}
	return hdr, nil
}

func copyFile(w io.Writer, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}
