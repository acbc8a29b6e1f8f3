package deploy_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// overlays are the kustomizations an operator applies.
var overlays = []string{"overlays/dev", "overlays/production"}

// workload is anything that runs pods from a template.
type workload struct {
	Kind, Name string
	Template   *corev1.PodTemplateSpec
	// LongRunning is false for Jobs.
	LongRunning bool
	// Claims are the StatefulSet's volumeClaimTemplates, mountable like volumes.
	Claims []string
}

// bundle is one rendered overlay, every object decoded strictly into its API type.
type bundle struct {
	Overlay         string
	Namespace       string
	Namespaces      map[string]*corev1.Namespace
	ServiceAccounts map[string]*corev1.ServiceAccount
	Services        map[string]*corev1.Service
	ConfigMaps      map[string]*corev1.ConfigMap
	Secrets         map[string]*corev1.Secret
	Deployments     map[string]*appsv1.Deployment
	StatefulSets    map[string]*appsv1.StatefulSet
	Jobs            map[string]*batchv1.Job
	HPAs            map[string]*autoscalingv2.HorizontalPodAutoscaler
	PDBs            map[string]*policyv1.PodDisruptionBudget
	NetPols         map[string]*networkingv1.NetworkPolicy
	Clusters        map[string]*cnpgCluster
	// What only the Helm chart renders (monitoring_types_test.go).
	ServiceMonitors map[string]*serviceMonitor
	PodMonitors     map[string]*podMonitor
	PrometheusRules map[string]*prometheusRule
	ExternalSecrets map[string]*externalSecretObject
}

func newBundle(overlay string) *bundle {
	return &bundle{
		Overlay:         overlay,
		Namespaces:      map[string]*corev1.Namespace{},
		ServiceAccounts: map[string]*corev1.ServiceAccount{},
		Services:        map[string]*corev1.Service{},
		ConfigMaps:      map[string]*corev1.ConfigMap{},
		Secrets:         map[string]*corev1.Secret{},
		Deployments:     map[string]*appsv1.Deployment{},
		StatefulSets:    map[string]*appsv1.StatefulSet{},
		Jobs:            map[string]*batchv1.Job{},
		HPAs:            map[string]*autoscalingv2.HorizontalPodAutoscaler{},
		PDBs:            map[string]*policyv1.PodDisruptionBudget{},
		NetPols:         map[string]*networkingv1.NetworkPolicy{},
		Clusters:        map[string]*cnpgCluster{},
		ServiceMonitors: map[string]*serviceMonitor{},
		PodMonitors:     map[string]*podMonitor{},
		PrometheusRules: map[string]*prometheusRule{},
		ExternalSecrets: map[string]*externalSecretObject{},
	}
}

// Workloads returns every pod-running object, sorted by kind and name.
func (b *bundle) Workloads() []workload {
	var out []workload
	for n, d := range b.Deployments {
		out = append(out, workload{Kind: "Deployment", Name: n, Template: &d.Spec.Template, LongRunning: true})
	}
	for n, s := range b.StatefulSets {
		w := workload{Kind: "StatefulSet", Name: n, Template: &s.Spec.Template, LongRunning: true}
		for _, c := range s.Spec.VolumeClaimTemplates {
			w.Claims = append(w.Claims, c.Name)
		}
		out = append(out, w)
	}
	for n, j := range b.Jobs {
		out = append(out, workload{Kind: "Job", Name: n, Template: &j.Spec.Template})
	}
	slices.SortFunc(out, func(a, b workload) int { return strings.Compare(a.Kind+"/"+a.Name, b.Kind+"/"+b.Name) })
	return out
}

// ConfigMapByPrefix returns the one ConfigMap generated from name (name-<hash>).
func (b *bundle) ConfigMapByPrefix(name string) (*corev1.ConfigMap, error) {
	var found []*corev1.ConfigMap
	for n, cm := range b.ConfigMaps {
		if n == name || strings.HasPrefix(n, name+"-") && !strings.Contains(strings.TrimPrefix(n, name+"-"), "-") {
			found = append(found, cm)
		}
	}
	if len(found) != 1 {
		return nil, fmt.Errorf("%d ConfigMaps generated from %q, want 1", len(found), name)
	}
	return found[0], nil
}

// render runs kustomize on the overlay directory, as `kubectl apply -k` would.
func render(t *testing.T, overlay string) *bundle {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	rm, err := k.Run(filesys.MakeFsOnDisk(), filepath.FromSlash(overlay))
	if err != nil {
		t.Fatalf("kustomize build %s: %v", overlay, err)
	}
	b := newBundle(overlay)
	for _, r := range rm.Resources() {
		js, err := r.MarshalJSON()
		if err != nil {
			t.Fatalf("%s: %s: %v", overlay, r.CurId(), err)
		}
		if err := b.add(js); err != nil {
			t.Errorf("%s: %v", overlay, err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	return b
}

// decodeStrict decodes js into v as the API server's strict field validation does:
// unknown, duplicate and mis-cased fields are errors.
func decodeStrict(js []byte, v any) error {
	strict, err := kjson.UnmarshalStrict(js, v, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err != nil {
		return err
	}
	return errors.Join(strict...)
}

// add decodes one rendered object into its API type.
func (b *bundle) add(js []byte) error {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name      string            `json:"name"`
			Namespace string            `json:"namespace"`
			Labels    map[string]string `json:"labels"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(js, &head); err != nil {
		return err
	}
	id := head.APIVersion + " " + head.Kind + " " + head.Metadata.Name
	if errs := validation.IsDNS1123Subdomain(head.Metadata.Name); len(errs) > 0 {
		return fmt.Errorf("%s: invalid name: %s", id, strings.Join(errs, "; "))
	}
	for k, v := range head.Metadata.Labels {
		if errs := append(validation.IsQualifiedName(k), validation.IsValidLabelValue(v)...); len(errs) > 0 {
			return fmt.Errorf("%s: invalid label %s=%s: %s", id, k, v, strings.Join(errs, "; "))
		}
	}
	if head.Kind != "Namespace" {
		if head.Metadata.Namespace == "" {
			return fmt.Errorf("%s: no namespace", id)
		}
		if b.Namespace == "" {
			b.Namespace = head.Metadata.Namespace
		} else if b.Namespace != head.Metadata.Namespace {
			return fmt.Errorf("%s: namespace %s, others are in %s", id, head.Metadata.Namespace, b.Namespace)
		}
	}
	var obj any
	var dup bool
	switch head.APIVersion + "/" + head.Kind {
	case "v1/Namespace":
		o := &corev1.Namespace{}
		_, dup = b.Namespaces[head.Metadata.Name]
		b.Namespaces[head.Metadata.Name], obj = o, o
	case "v1/ServiceAccount":
		o := &corev1.ServiceAccount{}
		_, dup = b.ServiceAccounts[head.Metadata.Name]
		b.ServiceAccounts[head.Metadata.Name], obj = o, o
	case "v1/Service":
		o := &corev1.Service{}
		_, dup = b.Services[head.Metadata.Name]
		b.Services[head.Metadata.Name], obj = o, o
	case "v1/ConfigMap":
		o := &corev1.ConfigMap{}
		_, dup = b.ConfigMaps[head.Metadata.Name]
		b.ConfigMaps[head.Metadata.Name], obj = o, o
	case "v1/Secret":
		o := &corev1.Secret{}
		_, dup = b.Secrets[head.Metadata.Name]
		b.Secrets[head.Metadata.Name], obj = o, o
	case "apps/v1/Deployment":
		o := &appsv1.Deployment{}
		_, dup = b.Deployments[head.Metadata.Name]
		b.Deployments[head.Metadata.Name], obj = o, o
	case "apps/v1/StatefulSet":
		o := &appsv1.StatefulSet{}
		_, dup = b.StatefulSets[head.Metadata.Name]
		b.StatefulSets[head.Metadata.Name], obj = o, o
	case "batch/v1/Job":
		o := &batchv1.Job{}
		_, dup = b.Jobs[head.Metadata.Name]
		b.Jobs[head.Metadata.Name], obj = o, o
	case "autoscaling/v2/HorizontalPodAutoscaler":
		o := &autoscalingv2.HorizontalPodAutoscaler{}
		_, dup = b.HPAs[head.Metadata.Name]
		b.HPAs[head.Metadata.Name], obj = o, o
	case "policy/v1/PodDisruptionBudget":
		o := &policyv1.PodDisruptionBudget{}
		_, dup = b.PDBs[head.Metadata.Name]
		b.PDBs[head.Metadata.Name], obj = o, o
	case "networking.k8s.io/v1/NetworkPolicy":
		o := &networkingv1.NetworkPolicy{}
		_, dup = b.NetPols[head.Metadata.Name]
		b.NetPols[head.Metadata.Name], obj = o, o
	case "postgresql.cnpg.io/v1/Cluster":
		o := &cnpgCluster{}
		_, dup = b.Clusters[head.Metadata.Name]
		b.Clusters[head.Metadata.Name], obj = o, o
	case "monitoring.coreos.com/v1/ServiceMonitor":
		o := &serviceMonitor{}
		_, dup = b.ServiceMonitors[head.Metadata.Name]
		b.ServiceMonitors[head.Metadata.Name], obj = o, o
	case "monitoring.coreos.com/v1/PodMonitor":
		o := &podMonitor{}
		_, dup = b.PodMonitors[head.Metadata.Name]
		b.PodMonitors[head.Metadata.Name], obj = o, o
	case "monitoring.coreos.com/v1/PrometheusRule":
		o := &prometheusRule{}
		_, dup = b.PrometheusRules[head.Metadata.Name]
		b.PrometheusRules[head.Metadata.Name], obj = o, o
	case "external-secrets.io/v1/ExternalSecret":
		o := &externalSecretObject{}
		_, dup = b.ExternalSecrets[head.Metadata.Name]
		b.ExternalSecrets[head.Metadata.Name], obj = o, o
	default:
		return fmt.Errorf("%s: kind not known to this test; add its API type", id)
	}
	if dup {
		return fmt.Errorf("%s: defined twice", id)
	}
	if err := decodeStrict(js, obj); err != nil {
		return fmt.Errorf("%s: %w", id, err)
	}
	return nil
}

// cnpgCluster is the part of CloudNativePG's Cluster (postgresql.cnpg.io/v1) that the
// manifests use; decoding strictly into it refuses any other field, so a field added
// to database.yaml must be added here after checking it against the CloudNativePG API
// reference.
type cnpgCluster struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name        string            `json:"name"`
		Namespace   string            `json:"namespace"`
		Labels      map[string]string `json:"labels,omitempty"`
		Annotations map[string]string `json:"annotations,omitempty"`
	} `json:"metadata"`
	Spec struct {
		Instances             int    `json:"instances"`
		ImageName             string `json:"imageName"`
		PrimaryUpdateStrategy string `json:"primaryUpdateStrategy,omitempty"`
		InheritedMetadata     *struct {
			Labels      map[string]string `json:"labels,omitempty"`
			Annotations map[string]string `json:"annotations,omitempty"`
		} `json:"inheritedMetadata,omitempty"`
		Bootstrap struct {
			InitDB struct {
				Database string `json:"database"`
				Owner    string `json:"owner"`
			} `json:"initdb"`
		} `json:"bootstrap"`
		PostgreSQL struct {
			Parameters  map[string]string `json:"parameters,omitempty"`
			Synchronous *struct {
				Method         string `json:"method"`
				Number         int    `json:"number"`
				DataDurability string `json:"dataDurability,omitempty"`
			} `json:"synchronous,omitempty"`
		} `json:"postgresql"`
		Storage struct {
			Size         string `json:"size"`
			StorageClass string `json:"storageClass,omitempty"`
		} `json:"storage"`
		WalStorage *struct {
			Size         string `json:"size"`
			StorageClass string `json:"storageClass,omitempty"`
		} `json:"walStorage,omitempty"`
		Resources corev1.ResourceRequirements `json:"resources"`
		Affinity  *struct {
			EnablePodAntiAffinity bool   `json:"enablePodAntiAffinity"`
			PodAntiAffinityType   string `json:"podAntiAffinityType,omitempty"`
			TopologyKey           string `json:"topologyKey,omitempty"`
		} `json:"affinity,omitempty"`
	} `json:"spec"`
}

// parseYAML decodes YAML (non-strictly) into v.
func parseYAML(data []byte, v any) error { return yaml.Unmarshal(data, v) }
