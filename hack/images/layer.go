package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// epoch is every file's mtime: identical inputs give identical layer digests,
// so re-importing an unchanged image into containerd is a no-op.
var epoch = time.Unix(0, 0).UTC()

// entry is one file system object of a layer.
type entry struct {
	Name string // absolute path inside the image
	Mode int64
	Src  string // host file to copy (regular files)
	Data []byte // inline content (regular files without Src)
	Link string // symlink target
	Dir  bool
	UID  int
	GID  int
}

func dir(name string, mode int64) entry       { return entry{Name: name, Mode: mode, Dir: true} }
func file(name, src string, mode int64) entry { return entry{Name: name, Src: src, Mode: mode} }
func text(name, data string) entry            { return entry{Name: name, Data: []byte(data), Mode: 0o644} }
func symlink(name, target string) entry       { return entry{Name: name, Link: target, Mode: 0o777} }

// layer builds an uncompressed tar of entries (parents first) and wraps it as
// a layer; go-containerregistry compresses it when the image is written.
func layer(entries []entry) (v1.Layer, error) {
	sort.SliceStable(entries, func(i, j int) bool { return entries[i].Name < entries[j].Name })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		if err := writeEntry(tw, e); err != nil {
			return nil, fmt.Errorf("%s: %w", e.Name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	})
}

func writeEntry(tw *tar.Writer, e entry) error {
	hdr := &tar.Header{
		Name:    path.Clean(e.Name)[1:], // tar entries are relative
		Mode:    e.Mode,
		Uid:     e.UID,
		Gid:     e.GID,
		ModTime: epoch,
		Format:  tar.FormatPAX,
	}
	switch {
	case e.Dir:
		hdr.Typeflag = tar.TypeDir
		hdr.Name += "/"
		return tw.WriteHeader(hdr)
	case e.Link != "":
		hdr.Typeflag = tar.TypeSymlink
		hdr.Linkname = e.Link
		return tw.WriteHeader(hdr)
	}
	data := e.Data
	if e.Src != "" {
		var err error
		if data, err = os.ReadFile(e.Src); err != nil {
			return err
		}
	}
	hdr.Typeflag = tar.TypeReg
	hdr.Size = int64(len(data))
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}
