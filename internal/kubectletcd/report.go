package kubectletcd

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/resources"
)

// ReportOptions says where the operator runs, for its logs.
type ReportOptions struct {
	OperatorNamespace  string
	OperatorDeployment string
	// LogLimitBytes caps each log; a support bundle should stay small enough to attach.
	LogLimitBytes int64
}

func newReportCommand(get envFunc) *cobra.Command {
	opts := ReportOptions{}
	var file string
	cmd := &cobra.Command{
		Use:   "report CLUSTER [-f out.tar.gz]",
		Short: "Write a support bundle: objects, events and logs of the cluster and the operator; Secret values redacted",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			env, err := get(cmd)
			if err != nil {
				return err
			}
			if file == "" {
				file = fmt.Sprintf("%s-report-%s.tar.gz", args[0], env.Now().UTC().Format("20060102-150405"))
			}
			var buf bytes.Buffer
			files, err := Report(cmd.Context(), env, args[0], opts, &buf)
			if err != nil {
				return err
			}
			if file == "-" {
				_, err = env.Out.Write(buf.Bytes())
				return err
			}
			if err := os.WriteFile(file, buf.Bytes(), 0o600); err != nil {
				return err
			}
			_, err = fmt.Fprintf(env.Out, "wrote %s (%d files, %s)\n", file, files, size(int64(buf.Len())))
			return err
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "where to write the bundle (- for stdout; default <cluster>-report-<time>.tar.gz)")
	cmd.Flags().StringVar(&opts.OperatorNamespace, "operator-namespace", "steward-system", "namespace of the Steward operator")
	cmd.Flags().StringVar(&opts.OperatorDeployment, "operator-deployment", "steward-controller-manager", "Deployment of the Steward operator")
	cmd.Flags().Int64Var(&opts.LogLimitBytes, "log-limit-bytes", 10<<20, "keep at most this many bytes of each log (its end)")
	return cmd
}

// bundle collects files; what cannot be read goes into errors.txt rather than failing the whole
// report: a partial bundle from someone with partial rights still helps.
type bundle struct {
	tw     *tar.Writer
	now    time.Time
	files  int
	errors []string
}

func (b *bundle) add(name string, data []byte) {
	hdr := &tar.Header{Name: name, Mode: 0o600, Size: int64(len(data)), ModTime: b.now}
	if err := b.tw.WriteHeader(hdr); err != nil {
		b.fail(name, err)
		return
	}
	if _, err := b.tw.Write(data); err != nil {
		b.fail(name, err)
		return
	}
	b.files++
}

func (b *bundle) yaml(name string, v any) {
	data, err := yaml.Marshal(v)
	if err != nil {
		b.fail(name, err)
		return
	}
	b.add(name, data)
}

func (b *bundle) fail(what string, err error) {
	b.errors = append(b.errors, fmt.Sprintf("%s: %v", what, err))
}

// Report writes the bundle as a gzipped tar to w and returns how many files it holds.
func Report(ctx context.Context, env *Env, name string, opts ReportOptions, w io.Writer) (int, error) {
	ec, err := getCluster(ctx, env, name)
	if err != nil {
		return 0, err // without the cluster there is nothing to relate the rest to
	}
	gz := gzip.NewWriter(w)
	b := &bundle{tw: tar.NewWriter(gz), now: env.Now()}
	prefix := name + "-report/"
	ns := env.Namespace

	b.yaml(prefix+"etcdcluster.yaml", clean(ec))
	members, err := listMembers(ctx, env, name)
	b.record("etcdmembers", err)
	backups, err := listBackups(ctx, env, name)
	b.record("etcdbackups", err)
	s := BuildStatus(ec, members, backups)
	var txt bytes.Buffer
	_ = RenderStatus(&txt, s, env.Now())
	b.add(prefix+"status.txt", txt.Bytes())
	b.yaml(prefix+"status.yaml", s)
	for i := range members {
		b.yaml(prefix+"etcdmembers/"+members[i].Name+".yaml", clean(&members[i]))
	}
	for i := range backups {
		b.yaml(prefix+"etcdbackups/"+backups[i].Name+".yaml", clean(&backups[i]))
	}
	var schedules stewardv1.EtcdBackupScheduleList
	if err := env.Client.List(ctx, &schedules, client.InNamespace(ns)); err != nil {
		b.record("etcdbackupschedules", apiError(err, "list", "etcdbackupschedules", ns, ""))
	}
	for i := range schedules.Items {
		if schedules.Items[i].Spec.Template.ClusterName == name {
			b.yaml(prefix+"etcdbackupschedules/"+schedules.Items[i].Name+".yaml", clean(&schedules.Items[i]))
		}
	}

	sel := client.MatchingLabels{stewardv1.LabelCluster: name}
	var pods corev1.PodList
	b.record("pods", apiError(env.Client.List(ctx, &pods, client.InNamespace(ns), sel), "list", "pods", ns, ""))
	related := map[string]bool{name: true}
	for i := range pods.Items {
		p := &pods.Items[i]
		related[p.Name] = true
		b.yaml(prefix+"pods/"+p.Name+".yaml", clean(p))
		b.logs(ctx, env, prefix+"logs/", p, opts.LogLimitBytes)
	}
	var pvcs corev1.PersistentVolumeClaimList
	b.record("persistentvolumeclaims", apiError(env.Client.List(ctx, &pvcs, client.InNamespace(ns), sel), "list", "persistentvolumeclaims", ns, ""))
	for i := range pvcs.Items {
		related[pvcs.Items[i].Name] = true
		b.yaml(prefix+"pvcs/"+pvcs.Items[i].Name+".yaml", clean(&pvcs.Items[i]))
	}
	var svcs corev1.ServiceList
	b.record("services", apiError(env.Client.List(ctx, &svcs, client.InNamespace(ns)), "list", "services", ns, ""))
	for i := range svcs.Items {
		if n := svcs.Items[i].Name; n == resources.PeerServiceName(name) || n == resources.ClientServiceName(name) || svcs.Items[i].Labels[stewardv1.LabelCluster] == name {
			b.yaml(prefix+"services/"+n+".yaml", clean(&svcs.Items[i]))
		}
	}
	for _, m := range members {
		related[m.Name] = true
	}
	for _, bk := range backups {
		related[bk.Name] = true
	}
	b.events(ctx, env, prefix+"events.yaml", name, related)
	b.secrets(ctx, env, prefix+"secrets.yaml", ec, backups)
	b.operator(ctx, env, prefix+"operator/", opts)

	if len(b.errors) > 0 {
		b.add(prefix+"errors.txt", []byte(strings.Join(b.errors, "\n")+"\n"))
	}
	if err := b.tw.Close(); err != nil {
		return 0, err
	}
	return b.files, gz.Close()
}

func (b *bundle) record(what string, err error) {
	if err != nil {
		b.fail(what, err)
	}
}

// clean drops managedFields: they triple an object's size and say nothing a support engineer needs.
func clean[T client.Object](o T) T {
	o.SetManagedFields(nil)
	return o
}

func (b *bundle) logs(ctx context.Context, env *Env, dir string, p *corev1.Pod, limit int64) {
	var containers []string
	for _, c := range p.Spec.InitContainers {
		containers = append(containers, c.Name)
	}
	for _, c := range p.Spec.Containers {
		containers = append(containers, c.Name)
	}
	restarted := map[string]bool{}
	for _, cs := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
		restarted[cs.Name] = cs.RestartCount > 0 || cs.LastTerminationState.Terminated != nil
	}
	for _, c := range containers {
		for _, previous := range []bool{false, true} {
			if previous && !restarted[c] {
				continue // no previous instance: the API would only answer with an error
			}
			o := &corev1.PodLogOptions{Container: c, Previous: previous, Timestamps: true}
			if limit > 0 {
				o.LimitBytes = &limit
			}
			data, err := env.Clientset.CoreV1().Pods(p.Namespace).GetLogs(p.Name, o).DoRaw(ctx)
			name := fmt.Sprintf("%s%s/%s.log", dir, p.Name, c)
			if previous {
				name = fmt.Sprintf("%s%s/%s.previous.log", dir, p.Name, c)
			}
			if err != nil {
				b.fail(name, apiError(err, "get", "pods/log", p.Namespace, ""))
				continue
			}
			b.add(name, data)
		}
	}
}

func (b *bundle) events(ctx context.Context, env *Env, name, cluster string, related map[string]bool) {
	var l corev1.EventList
	if err := env.Client.List(ctx, &l, client.InNamespace(env.Namespace)); err != nil {
		b.fail(name, apiError(err, "list", "events", env.Namespace, ""))
		return
	}
	var out []corev1.Event
	for _, e := range l.Items {
		if related[e.InvolvedObject.Name] || strings.HasPrefix(e.InvolvedObject.Name, cluster+"-") {
			out = append(out, *clean(&e))
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return eventTime(&out[i]).Before(eventTime(&out[j])) })
	b.yaml(name, out)
}

func eventTime(e *corev1.Event) time.Time {
	for _, t := range []time.Time{e.LastTimestamp.Time, e.EventTime.Time, e.FirstTimestamp.Time, e.CreationTimestamp.Time} {
		if !t.IsZero() {
			return t
		}
	}
	return time.Time{}
}

// SecretSummary is how a Secret appears in a report: never a value.
type SecretSummary struct {
	Name    string                  `json:"name"`
	Type    corev1.SecretType       `json:"type,omitempty"`
	Keys    []string                `json:"keys"`
	Created metav1.Time             `json:"created"`
	Labels  map[string]string       `json:"labels,omitempty"`
	Owners  []metav1.OwnerReference `json:"owners,omitempty"`
}

func (b *bundle) secrets(ctx context.Context, env *Env, name string, ec *stewardv1.EtcdCluster, backups []stewardv1.EtcdBackup) {
	want := map[string]bool{resources.CASecretName(ec.Name): true, resources.ClientTLSSecretName(ec.Name): true, clientSecretName(ec): true}
	for _, m := range ec.Status.Members {
		want[resources.MemberTLSSecretName(m.Name)] = true
	}
	if t := ec.Spec.TLS; t != nil && t.Peer.SecretName != "" {
		want[t.Peer.SecretName] = true
	}
	for _, bk := range backups {
		if s3 := bk.Spec.Destination.S3; s3 != nil {
			want[s3.CredentialsSecretRef.Name] = true
		}
	}
	var l corev1.SecretList
	if err := env.Client.List(ctx, &l, client.InNamespace(env.Namespace)); err != nil {
		b.fail(name, apiError(err, "list", "secrets", env.Namespace, ""))
		return
	}
	out := []SecretSummary{}
	for _, s := range l.Items {
		if !want[s.Name] && !strings.HasPrefix(s.Name, ec.Name+"-") {
			continue
		}
		sum := SecretSummary{Name: s.Name, Type: s.Type, Keys: []string{}, Created: s.CreationTimestamp, Labels: s.Labels, Owners: s.OwnerReferences}
		for k := range s.Data {
			sum.Keys = append(sum.Keys, k)
		}
		for k := range s.StringData {
			sum.Keys = append(sum.Keys, k)
		}
		slices.Sort(sum.Keys)
		out = append(out, sum)
	}
	b.yaml(name, out)
}

func (b *bundle) operator(ctx context.Context, env *Env, dir string, opts ReportOptions) {
	if opts.OperatorNamespace == "" || opts.OperatorDeployment == "" {
		return
	}
	var d appsv1.Deployment
	key := types.NamespacedName{Namespace: opts.OperatorNamespace, Name: opts.OperatorDeployment}
	if err := env.Client.Get(ctx, key, &d); err != nil {
		b.fail(dir, apiError(err, "get", "deployments", key.Namespace, key.Name))
		return
	}
	b.yaml(dir+"deployment.yaml", clean(&d))
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		b.fail(dir, err)
		return
	}
	var pods corev1.PodList
	if err := env.Client.List(ctx, &pods, client.InNamespace(key.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		b.fail(dir, apiError(err, "list", "pods", key.Namespace, ""))
		return
	}
	for i := range pods.Items {
		b.yaml(dir+"pods/"+pods.Items[i].Name+".yaml", clean(&pods.Items[i]))
		b.logs(ctx, env, dir+"logs/", &pods.Items[i], opts.LogLimitBytes)
	}
}
