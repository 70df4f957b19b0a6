package backupctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/backupjob"
	"github.com/etcd-steward/steward/internal/backupkey"
	"github.com/etcd-steward/steward/internal/resources"
	"github.com/etcd-steward/steward/internal/streamer"
)

// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;delete

// streamEvery is how often a schedule with continuous backup reads its streamer's progress.
const streamEvery = 10 * time.Second

// ReadProgress fetches a streamer Pod's /progress.
type ReadProgress func(ctx context.Context, pod *corev1.Pod) (streamer.Report, error)

// HTTPProgress reads /progress from the Pod's IP.
func HTTPProgress(ctx context.Context, pod *corev1.Pod) (streamer.Report, error) {
	var rep streamer.Report
	if pod.Status.PodIP == "" {
		return rep, fmt.Errorf("streamer Pod %s has no IP yet", pod.Name)
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s:%d/progress", pod.Status.PodIP, backupjob.StreamPort), nil)
	if err != nil {
		return rep, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return rep, err
	}
	defer func() { _ = resp.Body.Close() }()
	return rep, json.NewDecoder(resp.Body).Decode(&rep)
}

// reconcileStream keeps the schedule's streamer running while spec.continuous is set and the
// cluster exists and has formed, and records its progress. It returns whether a base snapshot is
// wanted now: the streamer lost revisions (a hole) and no backup was taken since.
func (r *ScheduleReconciler) reconcileStream(ctx context.Context, s *stewardv1.EtcdBackupSchedule, ec *stewardv1.EtcdCluster,
	backups []stewardv1.EtcdBackup) (bool, error) {
	name := backupjob.StreamName(s.Name)
	want := s.Spec.Continuous != nil && !s.Spec.Suspend && ec.Name != "" && ec.DeletionTimestamp == nil && ec.Status.ClusterID != ""
	if !want {
		if s.Spec.Continuous == nil {
			s.Status.Continuous = nil
		}
		err := r.Client.Delete(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.Namespace}})
		return false, client.IgnoreNotFound(err)
	}
	if r.Image == nil {
		return false, fmt.Errorf("no Steward image for the streamer")
	}
	image, err := r.Image(ctx)
	if err != nil {
		return false, fmt.Errorf("no Steward image for the streamer: %w", err)
	}
	if s.Status.Continuous == nil {
		s.Status.Continuous = &stewardv1.ContinuousBackupStatus{}
	}
	keyID, err := backupkey.Check(ctx, r.live(), s.Namespace, s.Spec.Template.Destination)
	var problem *backupkey.Problem
	switch {
	case errors.As(err, &problem):
		// A streamer already running keeps its keys and streams on; none is started without one.
		s.Status.Continuous.Waiting = problem.Error()
		return false, nil
	case err != nil:
		return false, err
	}
	s.Status.Continuous.KeyID, s.Status.Continuous.Waiting = keyID, "" // the streamer's report says why it waits
	st := backupjob.Stream{Schedule: s.Name, KeyID: keyID, Namespace: s.Namespace, Cluster: ec.Name, Image: image, Storage: s.Spec.Template.Destination,
		Endpoint:       fmt.Sprintf("%s://%s.%s.svc:%d", resources.Scheme(ec), resources.ClientServiceName(ec.Name), ec.Namespace, resources.ClientPort),
		SegmentSeconds: s.Spec.Continuous.SegmentSeconds, SegmentMaxMiB: s.Spec.Continuous.SegmentMaxMiB}
	if ec.TLSEnabled() {
		secret, err := JobClientSecret(ctx, r.Client, ec)
		if err != nil {
			return false, err
		}
		st.TLS = &backupjob.EtcdTLS{SecretName: secret}
	}
	desired := backupjob.StreamDeployment(st)
	if err := controllerutil.SetControllerReference(s, desired, r.Client.Scheme()); err != nil {
		return false, err
	}
	var cur appsv1.Deployment
	err = r.Client.Get(ctx, client.ObjectKeyFromObject(desired), &cur)
	switch {
	case apierrors.IsNotFound(err):
		if err := r.Client.Create(ctx, desired); err != nil {
			return false, err
		}
	case err != nil:
		return false, err
	case !equality.Semantic.DeepDerivative(desired.Spec.Template, cur.Spec.Template):
		cur.Spec.Template = desired.Spec.Template
		if err := r.Client.Update(ctx, &cur); err != nil {
			return false, err
		}
	}
	return r.readStream(ctx, s, backups)
}

// live reads what the cache does not hold: the streamer's Pods and the encryption key Secrets.
func (r *ScheduleReconciler) live() client.Reader {
	if r.APIReader != nil {
		return r.APIReader
	}
	return r.Client
}

// readStream copies the running streamer's report into status.continuous.
func (r *ScheduleReconciler) readStream(ctx context.Context, s *stewardv1.EtcdBackupSchedule, backups []stewardv1.EtcdBackup) (bool, error) {
	var pods corev1.PodList
	if err := r.live().List(ctx, &pods, client.InNamespace(s.Namespace), client.MatchingLabels{backupjob.LabelStream: s.Name}); err != nil {
		return false, err
	}
	read := r.Progress
	if read == nil {
		read = HTTPProgress
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
			continue
		}
		rep, err := read(ctx, p)
		if err != nil {
			continue // not answering yet; status keeps the last report and its time
		}
		applyReport(s.Status.Continuous, rep, r.now())
		return holeWantsBase(rep, backups), nil
	}
	return false, nil
}

func applyReport(c *stewardv1.ContinuousBackupStatus, rep streamer.Report, now time.Time) {
	c.DurableRevision, c.HeadRevision = rep.DurableRevision, rep.HeadRevision
	c.LagRevisions = max(0, rep.HeadRevision-rep.DurableRevision)
	c.DurableTime = timePtr(rep.DurableTime)
	c.Hole, c.Waiting = rep.Hole, rep.Waiting
	c.Restorable = nil
	for _, rg := range rep.Restorable {
		c.Restorable = append(c.Restorable, stewardv1.RestorableRange{FromRevision: rg.From, ToRevision: rg.To,
			FromTime: timePtr(rg.FromTime), ToTime: timePtr(rg.ToTime), Base: rg.Base})
	}
	c.ReportedAt = &metav1.Time{Time: now}
}

// holeWantsBase: after a hole the streamer waits for a base newer than the compaction; the schedule
// takes one at once unless one was created since the hole was found.
func holeWantsBase(rep streamer.Report, backups []stewardv1.EtcdBackup) bool {
	if rep.Hole == "" || rep.HoleAt.IsZero() {
		return false
	}
	for _, b := range backups {
		if !b.CreationTimestamp.Time.Before(rep.HoleAt.Truncate(time.Second)) {
			return false
		}
	}
	return true
}

func timePtr(t time.Time) *metav1.Time {
	if t.IsZero() {
		return nil
	}
	return &metav1.Time{Time: t}
}
