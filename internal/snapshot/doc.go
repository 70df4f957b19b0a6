// Package snapshot moves etcd snapshots between a member and an objstore.Store: Save streams one
// member's snapshot into the store, Fetch brings it back as a file for `etcdutl snapshot
// restore`, Verify runs a restore drill, Delete removes a backup.
//
// Object layout. Every backup is a directory of two objects under its key
// (BackupKey: <namespace>/<cluster>/<backup>; the store adds its own prefix, so in S3 the full
// key is <prefix><namespace>/<cluster>/<backup>/...):
//
//	<key>/snapshot.db.zst   the snapshot, zstd-compressed (snapshot.db with compression none)
//	<key>/manifest.json     Manifest, written only after the snapshot object completed
//
// A backup without a manifest did not finish; Delete removes the manifest first for the same
// reason. The snapshot object carries user metadata (compression, cluster, member, backup) from
// the start of its upload, so it can be read even without its manifest. The snapshot's bytes are
// exactly etcd's Snapshot stream: the bbolt database followed by etcd's sha256 of it, as
// `etcdctl snapshot save` writes them, so etcdutl restores them with its hash check on.
//
// The revision recorded in the manifest is read from the bytes as they stream (Scanner), since
// etcd's Snapshot RPC does not say which revision it captured.
package snapshot
