// Package v1alpha1 holds the etcd.steward.dev/v1alpha1 API: EtcdCluster, the object users write,
// and EtcdMember, one per etcd member, written only by the operator.
//
// +kubebuilder:object:generate=true
// +groupName=etcd.steward.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "etcd.steward.dev", Version: "v1alpha1"}

	// SchemeBuilder registers this package's kinds with a runtime.Scheme. It is apimachinery's, so
	// importing the API pulls in no controller-runtime.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds this package's kinds to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &EtcdCluster{}, &EtcdClusterList{}, &EtcdMember{}, &EtcdMemberList{},
		&EtcdBackup{}, &EtcdBackupList{}, &EtcdBackupSchedule{}, &EtcdBackupScheduleList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
