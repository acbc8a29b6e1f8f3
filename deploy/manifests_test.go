// Package deploy_test renders every kustomize overlay of deploy/ with the kustomize
// library (as `kubectl apply -k` does), decodes each object strictly into its
// Kubernetes API type, and checks the wiring between the objects and with
// envoy/envoy.yaml and the extproc catalog: Services select pods that exist and target
// their named ports, mounted ConfigMap and Secret keys exist, probes hit declared ports
// that the processes bind outside loopback, network policies let only the gateway reach
// accounting and only accounting reach PostgreSQL, Envoy's listener, admin and ext_proc
// addresses agree with the Service, probes and extproc, and the catalog loads with the
// credentials the pod provides.
//
// It lives in its own module (github.com/llmgw/gateway/deploy) so that kustomize and
// the Kubernetes API types stay out of the gateway's dependency graph. Run it with
// `cd deploy && go test ./...`; `-update` regenerates the copies it checks.
package deploy_test

import (
	"flag"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

var update = flag.Bool("update", false, "rewrite the generated copies (envoy.yaml, the dev catalog)")

func TestOverlaysRenderStrictly(t *testing.T) {
	for _, o := range overlays {
		t.Run(o, func(t *testing.T) {
			b := render(t, o)
			want := map[string]int{
				"Deployment": len(b.Deployments), "Service": len(b.Services), "Job": len(b.Jobs),
				"NetworkPolicy": len(b.NetPols), "PodDisruptionBudget": len(b.PDBs),
				"HorizontalPodAutoscaler": len(b.HPAs), "Namespace": len(b.Namespaces),
			}
			for kind, n := range want {
				if n == 0 {
					t.Errorf("no %s rendered", kind)
				}
			}
			if len(b.Clusters)+len(b.StatefulSets) != 1 {
				t.Errorf("%d CloudNativePG Clusters and %d StatefulSets, want exactly one PostgreSQL", len(b.Clusters), len(b.StatefulSets))
			}
		})
	}
}

func TestOverlaysWiring(t *testing.T) {
	for _, o := range overlays {
		b := render(t, o)
		for _, c := range checks {
			t.Run(o+"/"+c.name, func(t *testing.T) {
				for _, err := range c.run(b) {
					t.Error(err)
				}
			})
		}
	}
}

// TestChecksCatchBreakage proves the checks can fail: each case breaks one piece of
// wiring in a freshly rendered overlay and expects a report mentioning it.
func TestChecksCatchBreakage(t *testing.T) {
	tests := []struct {
		name    string
		overlay string
		breakIt func(b *bundle)
		want    string
	}{
		{
			name: "service targets an undeclared port", overlay: "overlays/dev",
			breakIt: func(b *bundle) { b.Services["gateway"].Spec.Ports[0].TargetPort = intstr.FromString("web") },
			want:    `targetPort web is not a container port`,
		},
		{
			name: "service selects nothing", overlay: "overlays/production",
			breakIt: func(b *bundle) { b.Services["accounting"].Spec.Selector["app.kubernetes.io/component"] = "srv" },
			want:    "selects no pod template",
		},
		{
			name: "envoy listener port differs from the service", overlay: "overlays/production",
			breakIt: func(b *bundle) {
				cm, _ := b.ConfigMapByPrefix("gateway-envoy")
				cm.Data["envoy.yaml"] = strings.Replace(cm.Data["envoy.yaml"], "port_value: 8080", "port_value: 8081", 1)
			},
			want: "is not Envoy's listener port 8081",
		},
		{
			name: "envoy listener on loopback", overlay: "overlays/dev",
			breakIt: func(b *bundle) {
				cm, _ := b.ConfigMapByPrefix("gateway-envoy")
				cm.Data["envoy.yaml"] = strings.Replace(cm.Data["envoy.yaml"], "address: 0.0.0.0", "address: 127.0.0.1", 2)
			},
			want: "envoy listener binds 127.0.0.1",
		},
		{
			name: "extproc listens elsewhere than the extproc cluster", overlay: "overlays/production",
			breakIt: func(b *bundle) {
				envRef(findContainer(&b.Deployments["gateway"].Spec.Template, "extproc"), "EXTPROC_ADDR").Value = "127.0.0.1:50061"
			},
			want: "but extproc listens on 127.0.0.1:50061",
		},
		{
			name: "probe on a port the container does not declare", overlay: "overlays/dev",
			breakIt: func(b *bundle) {
				findContainer(&b.Deployments["accounting"].Spec.Template, "accounting").ReadinessProbe.HTTPGet.Port = intstr.FromInt32(9999)
			},
			want: "readiness probe port 9999 is not a port of the container",
		},
		{
			name: "health endpoint bound to loopback", overlay: "overlays/dev",
			breakIt: func(b *bundle) {
				envRef(findContainer(&b.Deployments["accounting"].Spec.Template, "accounting"), "ACCOUNTING_METRICS_ADDR").Value = "127.0.0.1:9102"
			},
			want: "binds loopback",
		},
		{
			name: "mounted ConfigMap key missing", overlay: "overlays/dev",
			breakIt: func(b *bundle) {
				cm, _ := b.ConfigMapByPrefix("gateway-catalog")
				cm.Data = map[string]string{"other.yaml": "x"}
			},
			want: "has no key catalog.yaml",
		},
		{
			name: "unknown external secret", overlay: "overlays/production",
			breakIt: func(b *bundle) {
				for _, v := range b.Deployments["gateway"].Spec.Template.Spec.Volumes {
					if v.Name == "tokens" {
						v.Secret.SecretName = "gateway-tokenz"
					}
				}
			},
			want: `Secret "gateway-tokenz" is neither in the overlay nor a documented external Secret`,
		},
		{
			name: "migrations Job may call accounting", overlay: "overlays/dev",
			breakIt: func(b *bundle) {
				// Ingress opened to every pod of the product, and the Job's egress too.
				b.NetPols["accounting"].Spec.Ingress[0].From[0].PodSelector.MatchLabels = map[string]string{"app.kubernetes.io/part-of": "llmgw"}
				m := b.NetPols["accounting-migrate"]
				m.Spec.Egress = append(m.Spec.Egress, networkingv1.NetworkPolicyEgressRule{})
			},
			want: "Job/accounting-migrate reaching accounting:50052 is true, want false",
		},
		{
			name: "gateway may reach PostgreSQL", overlay: "overlays/production",
			breakIt: func(b *bundle) {
				b.NetPols["gateway-db"].Spec.Ingress[0].From[0].PodSelector.MatchLabels = map[string]string{"app.kubernetes.io/part-of": "llmgw"}
				g := b.NetPols["gateway"]
				g.Spec.Egress[1].To[0].PodSelector.MatchLabels = map[string]string{"llmgw.io/role": "ledger-database"}
				g.Spec.Egress[1].Ports = nil
			},
			want: "Deployment/gateway reaching PostgreSQL:5432 is true, want false",
		},
		{
			name: "gateway egress open to private addresses", overlay: "overlays/dev",
			breakIt: func(b *bundle) { b.NetPols["gateway"].Spec.Egress[2].To[0].IPBlock.Except = nil },
			want:    "may reach the internal address",
		},
		{
			name: "container may escalate", overlay: "overlays/production",
			breakIt: func(b *bundle) {
				yes := true
				findContainer(&b.Deployments["gateway"].Spec.Template, "envoy").SecurityContext.AllowPrivilegeEscalation = &yes
			},
			want: "allowPrivilegeEscalation must be false",
		},
		{
			name: "envoy image floats", overlay: "overlays/production",
			breakIt: func(b *bundle) {
				findContainer(&b.Deployments["gateway"].Spec.Template, "envoy").Image = "envoyproxy/envoy:v1.37-latest"
			},
			want: "is not pinned",
		},
		{
			name: "catalog channel on a cluster envoy lacks", overlay: "overlays/production",
			breakIt: func(b *bundle) {
				cm, _ := b.ConfigMapByPrefix("gateway-catalog")
				cm.Data["catalog.yaml"] = strings.Replace(cm.Data["catalog.yaml"], "cluster: anthropic", "cluster: claude", 1)
			},
			want: `cluster "claude" is not in envoy.yaml`,
		},
		{
			name: "catalog credential file not mounted", overlay: "overlays/production",
			breakIt: func(b *bundle) {
				cm, _ := b.ConfigMapByPrefix("gateway-catalog")
				cm.Data["catalog.yaml"] = strings.ReplaceAll(cm.Data["catalog.yaml"], "/etc/llmgw/providers/", "/etc/providers/")
			},
			want: "does not load in the extproc container",
		},
		{
			name: "catalog credential env not set", overlay: "overlays/dev",
			breakIt: func(b *bundle) {
				c := findContainer(&b.Deployments["gateway"].Spec.Template, "extproc")
				envRef(c, "DEMO_VIDEO_KEY").Name = "DEMO_VIDEO_KEY_X"
			},
			want: "DEMO_VIDEO_KEY is not set",
		},
		{
			name: "hpa fights deployment replicas", overlay: "overlays/dev",
			breakIt: func(b *bundle) { r := int32(3); b.Deployments["gateway"].Spec.Replicas = &r },
			want:    "sets replicas, which the HorizontalPodAutoscaler owns",
		},
		{
			name: "migrations use another database", overlay: "overlays/production",
			breakIt: func(b *bundle) {
				envRef(findContainer(&b.Jobs["accounting-migrate"].Spec.Template, "accounting"), "DATABASE_URL").ValueFrom.SecretKeyRef.Name = "gateway-db-superuser"
			},
			want: "DATABASE_URL differs between accounting and its migrations Job",
		},
		{
			name: "database URL points at no service", overlay: "overlays/dev",
			breakIt: func(b *bundle) {
				for n, s := range b.Secrets {
					if strings.HasPrefix(n, "gateway-database") {
						s.Data["uri"] = []byte("postgres://gateway:x@pg:5432/gateway")
					}
				}
			},
			want: "DATABASE_URL host pg is not a Service",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := render(t, tc.overlay)
			if errs := runChecks(b); len(errs) != 0 {
				t.Fatalf("the unbroken overlay already fails: %v", errs)
			}
			tc.breakIt(b)
			errs := runChecks(b)
			for _, err := range errs {
				if strings.Contains(err.Error(), tc.want) {
					return
				}
			}
			t.Errorf("no report contains %q; got %d: %v", tc.want, len(errs), errs)
		})
	}
}
