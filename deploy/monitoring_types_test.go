package deploy_test

// The parts of the CRDs the chart renders beyond Kubernetes' own kinds: the Prometheus
// Operator's ServiceMonitor, PodMonitor and PrometheusRule (monitoring.coreos.com/v1)
// and the External Secrets Operator's ExternalSecret (external-secrets.io/v1). Decoding
// strictly into them refuses any other field, so a field added to a template must be
// added here after checking it against the operator's API reference.

type objectMeta struct {
	Name        string            `json:"name"`
	Namespace   string            `json:"namespace"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type labelSelector struct {
	MatchLabels map[string]string `json:"matchLabels"`
}

type serviceMonitor struct {
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	Metadata   objectMeta `json:"metadata"`
	Spec       struct {
		Selector  labelSelector `json:"selector"`
		Endpoints []struct {
			Port     string `json:"port"`
			Path     string `json:"path,omitempty"`
			Interval string `json:"interval,omitempty"`
		} `json:"endpoints"`
	} `json:"spec"`
}

type podMonitor struct {
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	Metadata   objectMeta `json:"metadata"`
	Spec       struct {
		Selector            labelSelector `json:"selector"`
		PodMetricsEndpoints []struct {
			Port     string `json:"port"`
			Path     string `json:"path,omitempty"`
			Interval string `json:"interval,omitempty"`
		} `json:"podMetricsEndpoints"`
	} `json:"spec"`
}

// promRuleSpec is a PrometheusRule's spec, which is also the shape of a Prometheus rule file.
type promRuleSpec struct {
	Groups []struct {
		Name     string `json:"name"`
		Interval string `json:"interval,omitempty"`
		Rules    []struct {
			Alert       string            `json:"alert,omitempty"`
			Record      string            `json:"record,omitempty"`
			Expr        string            `json:"expr"`
			For         string            `json:"for,omitempty"`
			Labels      map[string]string `json:"labels,omitempty"`
			Annotations map[string]string `json:"annotations,omitempty"`
		} `json:"rules"`
	} `json:"groups"`
}

type prometheusRule struct {
	APIVersion string       `json:"apiVersion"`
	Kind       string       `json:"kind"`
	Metadata   objectMeta   `json:"metadata"`
	Spec       promRuleSpec `json:"spec"`
}

type externalSecretObject struct {
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	Metadata   objectMeta `json:"metadata"`
	Spec       struct {
		RefreshInterval string `json:"refreshInterval"`
		SecretStoreRef  struct {
			Kind string `json:"kind"`
			Name string `json:"name"`
		} `json:"secretStoreRef"`
		Target struct {
			Name           string `json:"name"`
			CreationPolicy string `json:"creationPolicy"`
		} `json:"target"`
		Data []struct {
			SecretKey string `json:"secretKey"`
			RemoteRef struct {
				Key      string `json:"key"`
				Property string `json:"property,omitempty"`
				Version  string `json:"version,omitempty"`
			} `json:"remoteRef"`
		} `json:"data"`
	} `json:"spec"`
}
