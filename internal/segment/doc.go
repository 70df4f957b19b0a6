// Package segment is the format of a continuous backup's change log: the watch events of a run of
// consecutive revisions, one object a segment, written by the streamer and replayed by a
// point-in-time restore.
//
// A segment's bytes (before compression and encryption, which wrap them whole) are frames:
//
//	magic "STWSEG1\n"
//	'H' header     JSON Header: the cluster, and the revision the segment continues from
//	'L' lease      uvarint lease ID, varint granted TTL in seconds: a lease a later put names
//	'R' revision   uvarint revision, varint stamp (unix ns), byte flags, then its events
//	'T' trailer    JSON Trailer: counts, first and last revision and stamp, sha256 of all before it
//
// each frame a kind byte, a uvarint length and that many bytes. A revision is one frame: the events
// of one transaction are never split across frames or segments. A revision's events keep etcd's
// order (their sub-revisions) and every field of etcd's KeyValue, so a replay rebuilds the same
// create and mod revisions and versions. The trailer is what makes a segment whole: a decoder
// refuses a segment without one, or whose hash or counts disagree ("truncated segment").
//
// Stamps: etcd keeps no time. A revision's stamp is the streamer's clock when the watch response
// carrying it arrived; FlagLive says the response was the newest the member had (its header
// revision was the revision itself), so the stamp is within the watch's latency of the commit.
// Revisions read while catching up are stamped when read, later than their commit: they are not
// live, and a time inside them maps only as "committed at or before".
package segment
