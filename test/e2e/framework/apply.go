package framework

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// FieldOwner is the server-side apply manager of everything the tests apply, so a
// test re-applying a changed manifest owns (and may drop) the fields it set before.
const FieldOwner = "steward-e2e"

// Apply server-side applies obj (typed or unstructured), forcing ownership: the test
// is the user, and its intent wins over whatever the operator defaulted.
func (f *Framework) Apply(ctx context.Context, obj client.Object) error {
	u, err := f.toUnstructured(obj)
	if err != nil {
		return err
	}
	if err := f.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	return nil
}

// ApplyYAML applies every document of a (multi-document) YAML manifest; objects
// without a namespace get ns when their kind is namespaced.
func (f *Framework) ApplyYAML(ctx context.Context, ns string, manifest []byte) error {
	objs, err := DecodeYAML(manifest)
	if err != nil {
		return err
	}
	for _, u := range objs {
		if u.GetNamespace() == "" && ns != "" {
			namespaced, err := f.Client.IsObjectNamespaced(u)
			if err != nil {
				return err
			}
			if namespaced {
				u.SetNamespace(ns)
			}
		}
		if err := f.Apply(ctx, u); err != nil {
			return err
		}
	}
	return nil
}

// MergePatch applies a JSON merge patch (RFC 7386) to obj and refreshes obj from the
// response: the usual way for a test to change one field, e.g.
// `{"spec":{"version":"3.6.16"}}`.
func (f *Framework) MergePatch(ctx context.Context, obj client.Object, patch string) error {
	return f.Client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(patch)))
}

// DecodeYAML splits a multi-document YAML or JSON stream into objects, skipping empty
// documents.
func DecodeYAML(manifest []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifest), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
}

func (f *Framework) toUnstructured(obj client.Object) (*unstructured.Unstructured, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u, nil
	}
	gvk, err := apiutil.GVKForObject(obj, f.Scheme)
	if err != nil {
		return nil, err
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	// Server-side apply refuses these; a typed object fetched from the API has them.
	u.SetResourceVersion("")
	u.SetManagedFields(nil)
	u.SetCreationTimestamp(metav1.Time{})
	unstructured.RemoveNestedField(u.Object, "status")
	return u, nil
}
