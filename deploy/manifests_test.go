// Package deploy_test renders every kustomize overlay of deploy/ with the kustomize
// library (as `kubectl apply -k` does), decodes each object strictly into its
// Kubernetes API type, and checks the wiring between the objects and with
// envoy/envoy.yaml and the extproc catalog: Services select pods that exist and target
// their named ports, mounted ConfigMap and Secret keys exist, probes hit declared ports
// that the processes bind outside loopback, network policies let only the gateway reach
// accounting and only accounting reach PostgreSQL (and nothing reach Envoy's admin
// port), Envoy's configuration decodes strictly into go-control-plane's Bootstrap, its
// listener and ext_proc addresses agree with the Service and extproc, its admin
// interface stays on loopback behind the ops listener that the probes use, and the
// catalog loads with the credentials the pod provides.
//
// It lives in its own module (github.com/llmgw/gateway/deploy) so that kustomize and
// the Kubernetes API types stay out of the gateway's dependency graph. Run it with
// `cd deploy && go test ./...`; `-update` regenerates the copies it checks.
package deploy_test

import (
	"flag"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
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

// editEnvoy replaces the first old with new in the gateway's envoy.yaml ConfigMap.
func editEnvoy(t *testing.T, b *bundle, old, new string) {
	t.Helper()
	cm, err := b.ConfigMapByPrefix("gateway-envoy")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(cm.Data["envoy.yaml"], old) {
		t.Fatalf("envoy.yaml has no %q to break", old)
	}
	cm.Data["envoy.yaml"] = strings.Replace(cm.Data["envoy.yaml"], old, new, 1)
}

// TestChecksCatchBreakage proves the checks can fail: each case breaks one piece of
// wiring in a freshly rendered overlay and expects a report mentioning it.
func TestChecksCatchBreakage(t *testing.T) {
	tests := []struct {
		name    string
		overlay string
		breakIt func(t *testing.T, b *bundle)
		want    string
	}{
		{
			name: "service targets an undeclared port", overlay: "overlays/dev",
			breakIt: func(t *testing.T, b *bundle) {
				b.Services["gateway"].Spec.Ports[0].TargetPort = intstr.FromString("web")
			},
			want: `targetPort web is not a container port`,
		},
		{
			name: "service selects nothing", overlay: "overlays/production",
			breakIt: func(t *testing.T, b *bundle) {
				b.Services["accounting"].Spec.Selector["app.kubernetes.io/component"] = "srv"
			},
			want: "selects no pod template",
		},
		{
			name: "envoy listener port differs from the service", overlay: "overlays/production",
			breakIt: func(t *testing.T, b *bundle) {
				cm, _ := b.ConfigMapByPrefix("gateway-envoy")
				cm.Data["envoy.yaml"] = strings.Replace(cm.Data["envoy.yaml"], "port_value: 8080", "port_value: 8081", 1)
			},
			want: "is not Envoy's listener port 8081",
		},
		{
			name: "envoy listener on loopback", overlay: "overlays/dev",
			breakIt: func(t *testing.T, b *bundle) {
				cm, _ := b.ConfigMapByPrefix("gateway-envoy")
				cm.Data["envoy.yaml"] = strings.Replace(cm.Data["envoy.yaml"], "address: 0.0.0.0", "address: 127.0.0.1", 2)
			},
			want: "envoy listener binds 127.0.0.1",
		},
		{
			name: "envoy admin on the pod's interfaces", overlay: "overlays/dev",
			breakIt: func(t *testing.T, b *bundle) {
				editEnvoy(t, b, "address: 127.0.0.1\n      port_value: 9901", "address: 0.0.0.0\n      port_value: 9901")
			},
			want: "envoy admin binds 0.0.0.0",
		},
		{
			name: "envoy admin port declared", overlay: "overlays/production",
			breakIt: func(t *testing.T, b *bundle) {
				c := findContainer(&b.Deployments["gateway"].Spec.Template, "envoy")
				c.Ports = append(c.Ports, corev1.ContainerPort{Name: "admin", ContainerPort: 9901, Protocol: corev1.ProtocolTCP})
			},
			want: "declares the admin port 9901",
		},
		{
			name: "envoy probed on the admin port", overlay: "overlays/dev",
			breakIt: func(t *testing.T, b *bundle) {
				c := findContainer(&b.Deployments["gateway"].Spec.Template, "envoy")
				c.Ports = append(c.Ports, corev1.ContainerPort{Name: "admin", ContainerPort: 9901, Protocol: corev1.ProtocolTCP})
				c.LivenessProbe.HTTPGet.Port = intstr.FromString("admin")
			},
			want: "liveness probe targets the admin port 9901",
		},
		{
			name: "envoy probed on a path the ops listener does not forward", overlay: "overlays/dev",
			breakIt: func(t *testing.T, b *bundle) {
				findContainer(&b.Deployments["gateway"].Spec.Template, "envoy").LivenessProbe.HTTPGet.Path = "/server_info"
			},
			want: "liveness probe GET /server_info: the ops listener does not forward it",
		},
		{
			name: "ops listener forwards a mutating admin endpoint", overlay: "overlays/production",
			breakIt: func(t *testing.T, b *bundle) { editEnvoy(t, b, "path: /stats/prometheus", "path: /quitquitquit") },
			want:    "forwards path /quitquitquit to the admin interface",
		},
		{
			name: "ops listener forwards a prefix", overlay: "overlays/dev",
			breakIt: func(t *testing.T, b *bundle) { editEnvoy(t, b, "path: /ready", "prefix: /ready") },
			want:    "forwards prefix /ready to the admin interface",
		},
		{
			name: "ops listener forwards any method", overlay: "overlays/dev",
			breakIt: func(t *testing.T, b *bundle) {
				editEnvoy(t, b, "string_match: {exact: GET}", "string_match: {exact: POST}")
			},
			want: "forwards /ready for other methods than GET",
		},
		{
			name: "ops listener rewrites the path", overlay: "overlays/production",
			breakIt: func(t *testing.T, b *bundle) {
				editEnvoy(t, b, "cluster: envoy-admin\n", "cluster: envoy-admin\n                            prefix_rewrite: /quitquitquit\n")
			},
			want: "rewrites the path of /ready",
		},
		{
			name: "ops listener answers the rest with 200", overlay: "overlays/dev",
			breakIt: func(t *testing.T, b *bundle) { editEnvoy(t, b, "status: 404", "status: 200") },
			want:    "direct_response 200, want 404",
		},
		{
			name: "unknown field in the ops listener", overlay: "overlays/production",
			breakIt: func(t *testing.T, b *bundle) {
				editEnvoy(t, b, "stat_prefix: ops\n", "stat_prefix: ops\n                no_such_field: true\n")
			},
			want: "no_such_field",
		},
		{
			name: "network policy admits the admin port", overlay: "overlays/production",
			breakIt: func(t *testing.T, b *bundle) {
				r := &b.NetPols["gateway"].Spec.Ingress[1]
				p := intstr.FromInt32(9901)
				r.Ports = append(r.Ports, networkingv1.NetworkPolicyPort{Port: &p})
			},
			want: "admits ingress to Envoy's admin port 9901",
		},
		{
			name: "monitoring cannot scrape envoy", overlay: "overlays/dev",
			breakIt: func(t *testing.T, b *bundle) {
				r := &b.NetPols["gateway"].Spec.Ingress[1]
				r.Ports = slices.DeleteFunc(r.Ports, func(p networkingv1.NetworkPolicyPort) bool { return p.Port.String() == "ops" })
			},
			want: "the monitoring namespace cannot reach Envoy's ops listener on 9902",
		},
		{
			name: "catalog channel on the admin cluster", overlay: "overlays/production",
			breakIt: func(t *testing.T, b *bundle) {
				cm, _ := b.ConfigMapByPrefix("gateway-catalog")
				cm.Data["catalog.yaml"] = strings.Replace(cm.Data["catalog.yaml"], `address: "api.anthropic.com:443", tls: true`, `address: "127.0.0.1:9901"`, 1)
			},
			want: `catalog cluster anthropic: 127.0.0.1:9901 is Envoy's admin interface`,
		},
		{
			name: "extproc listens elsewhere than the extproc cluster", overlay: "overlays/production",
			breakIt: func(t *testing.T, b *bundle) {
				envRef(findContainer(&b.Deployments["gateway"].Spec.Template, "extproc"), "EXTPROC_ADDR").Value = "127.0.0.1:50061"
			},
			want: "but extproc listens on 127.0.0.1:50061",
		},
		{
			name: "accounting without the runtime setting", overlay: "overlays/production",
			breakIt: func(t *testing.T, b *bundle) {
				c := findContainer(&b.Deployments["accounting"].Spec.Template, "accounting")
				c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "GODEBUG" })
			},
			want: "container accounting: GODEBUG is not set",
		},
		{
			name: "extproc's schedtrace too short", overlay: "overlays/dev",
			breakIt: func(t *testing.T, b *bundle) {
				envRef(findContainer(&b.Deployments["gateway"].Spec.Template, "extproc"), "GODEBUG").Value = "http2client=0,schedtrace=1000"
			},
			want: "container extproc: GODEBUG schedtrace=1000, want a period of at least a day",
		},
		{
			name: "probe on a port the container does not declare", overlay: "overlays/dev",
			breakIt: func(t *testing.T, b *bundle) {
				findContainer(&b.Deployments["accounting"].Spec.Template, "accounting").ReadinessProbe.HTTPGet.Port = intstr.FromInt32(9999)
			},
			want: "readiness probe port 9999 is not a port of the container",
		},
		{
			name: "health endpoint bound to loopback", overlay: "overlays/dev",
			breakIt: func(t *testing.T, b *bundle) {
				envRef(findContainer(&b.Deployments["accounting"].Spec.Template, "accounting"), "ACCOUNTING_METRICS_ADDR").Value = "127.0.0.1:9102"
			},
			want: "binds loopback",
		},
		{
			name: "mounted ConfigMap key missing", overlay: "overlays/dev",
			breakIt: func(t *testing.T, b *bundle) {
				cm, _ := b.ConfigMapByPrefix("gateway-catalog")
				cm.Data = map[string]string{"other.yaml": "x"}
			},
			want: "has no key catalog.yaml",
		},
		{
			name: "unknown external secret", overlay: "overlays/production",
			breakIt: func(t *testing.T, b *bundle) {
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
			breakIt: func(t *testing.T, b *bundle) {
				// Ingress opened to every pod of the product, and the Job's egress too.
				b.NetPols["accounting"].Spec.Ingress[0].From[0].PodSelector.MatchLabels = map[string]string{"app.kubernetes.io/part-of": "llmgw"}
				m := b.NetPols["accounting-migrate"]
				m.Spec.Egress = append(m.Spec.Egress, networkingv1.NetworkPolicyEgressRule{})
			},
			want: "Job/accounting-migrate reaching accounting:50052 is true, want false",
		},
		{
			name: "gateway may reach PostgreSQL", overlay: "overlays/production",
			breakIt: func(t *testing.T, b *bundle) {
				b.NetPols["gateway-db"].Spec.Ingress[0].From[0].PodSelector.MatchLabels = map[string]string{"app.kubernetes.io/part-of": "llmgw"}
				g := b.NetPols["gateway"]
				g.Spec.Egress[1].To[0].PodSelector.MatchLabels = map[string]string{"llmgw.io/role": "ledger-database"}
				g.Spec.Egress[1].Ports = nil
			},
			want: "Deployment/gateway reaching PostgreSQL:5432 is true, want false",
		},
		{
			name: "gateway egress open to private addresses", overlay: "overlays/dev",
			breakIt: func(t *testing.T, b *bundle) { b.NetPols["gateway"].Spec.Egress[2].To[0].IPBlock.Except = nil },
			want:    "may reach the internal address",
		},
		{
			name: "container may escalate", overlay: "overlays/production",
			breakIt: func(t *testing.T, b *bundle) {
				yes := true
				findContainer(&b.Deployments["gateway"].Spec.Template, "envoy").SecurityContext.AllowPrivilegeEscalation = &yes
			},
			want: "allowPrivilegeEscalation must be false",
		},
		{
			name: "envoy image floats", overlay: "overlays/production",
			breakIt: func(t *testing.T, b *bundle) {
				findContainer(&b.Deployments["gateway"].Spec.Template, "envoy").Image = "envoyproxy/envoy:v1.37-latest"
			},
			want: "is not pinned",
		},
		{
			name: "envoy image is another release than envoy/VERSION", overlay: "overlays/production",
			breakIt: func(t *testing.T, b *bundle) {
				findContainer(&b.Deployments["gateway"].Spec.Template, "envoy").Image = "envoyproxy/envoy:v1.37.5"
			},
			want: "(envoy/VERSION)",
		},
		{
			name: "catalog cluster named like a static one", overlay: "overlays/production",
			breakIt: func(t *testing.T, b *bundle) {
				cm, _ := b.ConfigMapByPrefix("gateway-catalog")
				cm.Data["catalog.yaml"] = strings.ReplaceAll(cm.Data["catalog.yaml"], "name: anthropic,", "name: extproc,")
				cm.Data["catalog.yaml"] = strings.ReplaceAll(cm.Data["catalog.yaml"], "cluster: anthropic", "cluster: extproc")
			},
			want: "catalog cluster extproc: envoy.yaml has a static cluster of that name",
		},
		{
			name: "catalog channel on a cluster envoy lacks", overlay: "overlays/production",
			breakIt: func(t *testing.T, b *bundle) {
				cm, _ := b.ConfigMapByPrefix("gateway-catalog")
				cm.Data["catalog.yaml"] = strings.Replace(cm.Data["catalog.yaml"], "cluster: anthropic", "cluster: claude", 1)
			},
			want: `cluster "claude" is not in the catalog's clusters`,
		},
		{
			name: "catalog credential file not mounted", overlay: "overlays/production",
			breakIt: func(t *testing.T, b *bundle) {
				cm, _ := b.ConfigMapByPrefix("gateway-catalog")
				cm.Data["catalog.yaml"] = strings.ReplaceAll(cm.Data["catalog.yaml"], "/etc/llmgw/providers/", "/etc/providers/")
			},
			want: "does not load in the extproc container",
		},
		{
			name: "catalog credential env not set", overlay: "overlays/dev",
			breakIt: func(t *testing.T, b *bundle) {
				c := findContainer(&b.Deployments["gateway"].Spec.Template, "extproc")
				envRef(c, "DEMO_VIDEO_KEY").Name = "DEMO_VIDEO_KEY_X"
			},
			want: "DEMO_VIDEO_KEY is not set",
		},
		{
			name: "hpa fights deployment replicas", overlay: "overlays/dev",
			breakIt: func(t *testing.T, b *bundle) { r := int32(3); b.Deployments["gateway"].Spec.Replicas = &r },
			want:    "sets replicas, which the HorizontalPodAutoscaler owns",
		},
		{
			name: "migrations use another database", overlay: "overlays/production",
			breakIt: func(t *testing.T, b *bundle) {
				envRef(findContainer(&b.Jobs["accounting-migrate"].Spec.Template, "accounting"), "DATABASE_URL").ValueFrom.SecretKeyRef.Name = "gateway-db-superuser"
			},
			want: "DATABASE_URL differs between accounting and its migrations Job",
		},
		{
			name: "database URL points at no service", overlay: "overlays/dev",
			breakIt: func(t *testing.T, b *bundle) {
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
			tc.breakIt(t, b)
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
