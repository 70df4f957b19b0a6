// Package backupkey reads a backup destination's encryption key Secret for the operator: is it
// there, does it parse, and which key seals (its public ID, for status and for rolling the
// streamer onto a rotated key). The operator never writes the key anywhere; the Pods that move
// data mount the Secret themselves.
package backupkey

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/encryption"
)

// DefaultKey is the Secret key read when keySecretRef.key is empty.
const DefaultKey = "keys.txt"

// Problem is a key Secret that cannot serve: missing, without the key, or not an age identity
// file. Its message names the Secret and the key, never their content.
type Problem struct{ msg string }

func (p *Problem) Error() string { return p.msg }

// KeyName is the Secret key ref names, defaulted.
func KeyName(ref stewardv1.EncryptionKeyRef) string {
	if ref.Key == "" {
		return DefaultKey
	}
	return ref.Key
}

// Check returns the sealing key's ID for a destination with encryption ("" without), a *Problem
// when its Secret cannot serve, or the API's error. r should read live (an APIReader): the
// operator's cache holds no user Secrets.
func Check(ctx context.Context, r client.Reader, namespace string, s stewardv1.BackupStorage) (string, error) {
	if s.Encryption == nil {
		return "", nil
	}
	ref := s.Encryption.KeySecretRef
	key := KeyName(ref)
	var sec corev1.Secret
	err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, &sec)
	switch {
	case apierrors.IsNotFound(err):
		return "", &Problem{fmt.Sprintf("the encryption key Secret %q does not exist in namespace %q", ref.Name, namespace)}
	case err != nil:
		return "", err
	}
	text, ok := sec.Data[key]
	if !ok {
		return "", &Problem{fmt.Sprintf("the encryption key Secret %q has no key %q", ref.Name, key)}
	}
	k, err := encryption.ParseKeyring(text)
	if err != nil {
		return "", &Problem{fmt.Sprintf("the encryption key Secret %q key %q: %v", ref.Name, key, err)}
	}
	return k.KeyID(), nil
}
