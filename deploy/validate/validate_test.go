package validate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"
)

// deployDir is deploy/, this module's parent.
const deployDir = ".."

// kustomization is the part of kustomize's Kustomization the manifests use
// (decoded strictly, so any other field is an error here until added).
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Resources  []string `json:"resources,omitempty"`
	Patches    []struct {
		Path string `json:"path"`
	} `json:"patches,omitempty"`
	Labels []struct {
		Pairs            map[string]string `json:"pairs"`
		IncludeSelectors bool              `json:"includeSelectors,omitempty"`
	} `json:"labels,omitempty"`
}

// object is one decoded manifest object.
type object struct {
	file string
	kind string
	v    any // the typed object (or map for InferencePool)
}

// strict decodes JSON into v; unknown fields are errors.
func strict(js []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(js))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return fmt.Errorf("trailing data")
	}
	return nil
}

// typed returns a new typed object for apiVersion/kind.
func typed(apiVersion, kind string) (any, bool) {
	switch apiVersion + "/" + kind {
	case "apps/v1/Deployment":
		return &appsv1.Deployment{}, true
	case "v1/Service":
		return &corev1.Service{}, true
	case "v1/PersistentVolumeClaim":
		return &corev1.PersistentVolumeClaim{}, true
	case "v1/ServiceAccount":
		return &corev1.ServiceAccount{}, true
	case "rbac.authorization.k8s.io/v1/Role":
		return &rbacv1.Role{}, true
	case "rbac.authorization.k8s.io/v1/RoleBinding":
		return &rbacv1.RoleBinding{}, true
	case "monitoring.coreos.com/v1/PodMonitor":
		return &monitoringv1.PodMonitor{}, true
	case "gateway.networking.k8s.io/v1/HTTPRoute":
		return &gatewayv1.HTTPRoute{}, true
	}
	return nil, false
}

// schema is the part of an OpenAPI v3 schema the InferencePool CRD uses.
type schema struct {
	Type                 string            `json:"type"`
	Properties           map[string]schema `json:"properties"`
	Items                *schema           `json:"items"`
	Required             []string          `json:"required"`
	Enum                 []any             `json:"enum"`
	AdditionalProperties *schema           `json:"additionalProperties"`
	MaxItems             *int              `json:"maxItems"`
	MinItems             *int              `json:"minItems"`
	Minimum              *float64          `json:"minimum"`
	Maximum              *float64          `json:"maximum"`
	Pattern              string            `json:"pattern"`
	MaxLength            *int              `json:"maxLength"`
	MinLength            *int              `json:"minLength"`
}

// check validates v against s: types, required and unknown fields, enums,
// bounds and patterns (not the CEL rules).
func (s schema) check(path string, v any) []string {
	var errs []string
	bad := func(format string, args ...any) { errs = append(errs, path+": "+fmt.Sprintf(format, args...)) }
	switch s.Type {
	case "object":
		m, ok := v.(map[string]any)
		if !ok {
			bad("want an object, got %T", v)
			return errs
		}
		for _, r := range s.Required {
			if _, ok := m[r]; !ok {
				bad("missing required field %q", r)
			}
		}
		for k, fv := range m {
			ps, ok := s.Properties[k]
			switch {
			case path == "" && k == "metadata": // checked as an ObjectMeta by the caller
			case ok:
				errs = append(errs, ps.check(path+"."+k, fv)...)
			case s.AdditionalProperties != nil:
				errs = append(errs, s.AdditionalProperties.check(path+"."+k, fv)...)
			case path == "" && (k == "apiVersion" || k == "kind" || k == "metadata"):
			default:
				bad("unknown field %q", k)
			}
		}
	case "array":
		a, ok := v.([]any)
		if !ok {
			bad("want an array, got %T", v)
			return errs
		}
		if s.MinItems != nil && len(a) < *s.MinItems || s.MaxItems != nil && len(a) > *s.MaxItems {
			bad("%d items out of bounds", len(a))
		}
		for i, e := range a {
			if s.Items != nil {
				errs = append(errs, s.Items.check(fmt.Sprintf("%s[%d]", path, i), e)...)
			}
		}
	case "string":
		str, ok := v.(string)
		if !ok {
			bad("want a string, got %T", v)
			return errs
		}
		if s.MinLength != nil && len(str) < *s.MinLength || s.MaxLength != nil && len(str) > *s.MaxLength {
			bad("length %d out of bounds", len(str))
		}
		if s.Pattern != "" && !regexp.MustCompile(s.Pattern).MatchString(str) {
			bad("%q does not match %s", str, s.Pattern)
		}
	case "integer":
		n, ok := v.(float64)
		if !ok || n != float64(int64(n)) {
			bad("want an integer, got %v", v)
			return errs
		}
		if s.Minimum != nil && n < *s.Minimum || s.Maximum != nil && n > *s.Maximum {
			bad("%v out of bounds", n)
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			bad("want a boolean, got %T", v)
		}
	}
	if len(s.Enum) > 0 && !slices.Contains(s.Enum, v) {
		bad("%v not one of %v", v, s.Enum)
	}
	return errs
}

// inferencePoolSchema reads the served v1 schema from the vendored CRD.
func inferencePoolSchema(t *testing.T) schema {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(deployDir, "crds", "inference.networking.k8s.io_inferencepools.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Name   string `json:"name"`
				Schema struct {
					OpenAPIV3Schema schema `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(b, &crd); err != nil {
		t.Fatal(err)
	}
	for _, v := range crd.Spec.Versions {
		if v.Name == "v1" {
			return v.Schema.OpenAPIV3Schema
		}
	}
	t.Fatal("CRD has no v1 version")
	return schema{}
}

// load decodes every manifest under deploy/ (but crds/, validate/ and
// compose/, which holds a docker compose file, not Kubernetes objects)
// strictly, and checks that each kustomization names files that exist.
func load(t *testing.T) []object {
	t.Helper()
	pool := inferencePoolSchema(t)
	var objs []object
	err := filepath.WalkDir(deployDir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(deployDir, path)
		if d.IsDir() {
			if rel == "crds" || rel == "validate" || rel == "compose" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".yaml") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if d.Name() == "kustomization.yaml" {
			js, err := yaml.YAMLToJSON(b)
			if err != nil {
				return fmt.Errorf("%s: %w", rel, err)
			}
			var k kustomization
			if err := strict(js, &k); err != nil {
				return fmt.Errorf("%s: %w", rel, err)
			}
			if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
				t.Errorf("%s: %s/%s is not a Kustomization", rel, k.APIVersion, k.Kind)
			}
			refs := slices.Clone(k.Resources)
			for _, p := range k.Patches {
				refs = append(refs, p.Path)
			}
			for _, r := range refs {
				if _, err := os.Stat(filepath.Join(filepath.Dir(path), r)); err != nil {
					t.Errorf("%s names %s: %v", rel, r, err)
				}
			}
			return nil
		}
		for i, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
			js, err := yaml.YAMLToJSON([]byte(doc))
			if err != nil {
				return fmt.Errorf("%s #%d: %w", rel, i, err)
			}
			if string(js) == "null" {
				continue
			}
			var tm metav1.TypeMeta
			if err := json.Unmarshal(js, &tm); err != nil {
				return fmt.Errorf("%s #%d: %w", rel, i, err)
			}
			where := fmt.Sprintf("%s #%d (%s)", rel, i, tm.Kind)
			if tm.APIVersion == "inference.networking.k8s.io/v1" && tm.Kind == "InferencePool" {
				var m map[string]any
				if err := json.Unmarshal(js, &m); err != nil {
					return fmt.Errorf("%s: %w", where, err)
				}
				for _, e := range pool.check("", m) {
					t.Errorf("%s: %s", where, e)
				}
				mjs, _ := json.Marshal(m["metadata"])
				if err := strict(mjs, &metav1.ObjectMeta{}); err != nil {
					t.Errorf("%s: metadata: %v", where, err)
				}
				objs = append(objs, object{rel, tm.Kind, m})
				continue
			}
			v, ok := typed(tm.APIVersion, tm.Kind)
			if !ok {
				t.Errorf("%s: no API type known for %s %s", where, tm.APIVersion, tm.Kind)
				continue
			}
			if err := strict(js, v); err != nil {
				t.Errorf("%s: %v", where, err)
				continue
			}
			objs = append(objs, object{rel, tm.Kind, v})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// find returns the object of kind in file.
func find[T any](t *testing.T, objs []object, file string) T {
	t.Helper()
	for _, o := range objs {
		if v, ok := o.v.(T); ok && o.file == file {
			return v
		}
	}
	var zero T
	t.Fatalf("%s: no %T", file, zero)
	return zero
}

// TestStrictDecode: every object decodes into its API type with no unknown
// field, and the InferencePool passes the vendored CRD's schema.
func TestStrictDecode(t *testing.T) {
	objs := load(t)
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.kind)
	}
	for _, want := range []string{"Deployment", "Service", "PersistentVolumeClaim", "PodMonitor", "InferencePool", "HTTPRoute"} {
		if !slices.Contains(kinds, want) {
			t.Errorf("no %s among the manifests (%v)", want, kinds)
		}
	}
}

// TestStrictDecodeCatchesTypos: the decoding the other tests rely on
// rejects a misspelt field and a wrong type.
func TestStrictDecodeCatchesTypos(t *testing.T) {
	js, _ := yaml.YAMLToJSON([]byte("apiVersion: apps/v1\nkind: Deployment\nspec:\n  replica: 2\n"))
	if err := strict(js, &appsv1.Deployment{}); err == nil {
		t.Error("spec.replica (for replicas) decoded without error")
	}
	bad := map[string]any{"spec": map[string]any{"selector": map[string]any{}, "targetPort": []any{}}}
	if errs := inferencePoolSchema(t).check("", bad); len(errs) == 0 {
		t.Error("InferencePool with targetPort (for targetPorts) passed the schema")
	}
}

// TestDeploymentContract checks what the README promises about the base
// Deployment and the overlays.
func TestDeploymentContract(t *testing.T) {
	objs := load(t)
	d := find[*appsv1.Deployment](t, objs, filepath.Join("base", "deployment.yaml"))
	spec := d.Spec.Template.Spec
	c := spec.Containers[0]
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
		if !strings.HasPrefix(e.Name, "WEFT_") {
			t.Errorf("env %s: weft reads only WEFT_*", e.Name)
		}
	}
	drain, err := time.ParseDuration(env["WEFT_DRAIN_TIMEOUT"])
	if err != nil {
		t.Fatalf("WEFT_DRAIN_TIMEOUT: %v", err)
	}
	if g := spec.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second <= drain {
		t.Errorf("terminationGracePeriodSeconds %v not longer than the drain timeout %v", g, drain)
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if want := map[string]int32{"grpc": 50051, "http": 8080, "metrics": 9090}; fmt.Sprint(ports) != fmt.Sprint(want) {
		t.Errorf("ports %v, want %v", ports, want)
	}
	if env["WEFT_ADDR"] != "0.0.0.0:50051" || env["WEFT_METRICS_ADDR"] != "0.0.0.0:9090" {
		t.Errorf("WEFT_ADDR %q, WEFT_METRICS_ADDR %q do not listen on the named ports", env["WEFT_ADDR"], env["WEFT_METRICS_ADDR"])
	}
	for name, p := range map[string]*corev1.Probe{"startup": c.StartupProbe, "readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		if p == nil || p.GRPC == nil || p.GRPC.Port != 50051 {
			t.Errorf("%s probe %+v: want a native gRPC probe on 50051", name, p)
		}
	}
	if sp := c.StartupProbe; sp != nil && sp.PeriodSeconds*sp.FailureThreshold < 300 {
		t.Errorf("startup probe allows %ds for loading, want >= 300", sp.PeriodSeconds*sp.FailureThreshold)
	}
	model := env["WEFT_MODEL"]
	mounted := false
	for _, m := range c.VolumeMounts {
		if strings.HasPrefix(model, m.MountPath+"/") {
			for _, v := range spec.Volumes {
				mounted = mounted || v.Name == m.Name && v.PersistentVolumeClaim != nil
			}
		}
	}
	if !mounted {
		t.Errorf("WEFT_MODEL %q is not on a mounted PVC", model)
	}

	grpcSvc := find[*corev1.Service](t, objs, filepath.Join("base", "service-grpc.yaml"))
	if grpcSvc.Spec.ClusterIP != corev1.ClusterIPNone || len(grpcSvc.Spec.Ports) != 1 ||
		grpcSvc.Spec.Ports[0].AppProtocol == nil || *grpcSvc.Spec.Ports[0].AppProtocol != "kubernetes.io/h2c" {
		t.Errorf("gRPC Service %+v: want headless with appProtocol kubernetes.io/h2c", grpcSvc.Spec)
	}

	gpu := find[*appsv1.Deployment](t, objs, filepath.Join("overlays", "gpu", "deployment-patch.yaml"))
	cpu := find[*appsv1.Deployment](t, objs, filepath.Join("overlays", "cpu", "deployment-patch.yaml"))
	for _, p := range []*appsv1.Deployment{gpu, cpu} {
		if p.Name != d.Name || p.Spec.Template.Spec.Containers[0].Name != c.Name {
			t.Errorf("patch %s/%s does not target the base's %s/%s", p.Name, p.Spec.Template.Spec.Containers[0].Name, d.Name, c.Name)
		}
	}
	if q := gpu.Spec.Template.Spec.Containers[0].Resources.Limits["nvidia.com/gpu"]; q.Value() != 1 {
		t.Errorf("gpu overlay limits nvidia.com/gpu %v, want 1", q.String())
	}
}

// TestPickerNamesWeftMetrics: the Endpoint Picker is told metric names that
// the server exports (read from server/metrics.go).
func TestPickerNamesWeftMetrics(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(deployDir, "..", "server", "metrics.go"))
	if err != nil {
		t.Fatal(err)
	}
	objs := load(t)
	epp := find[*appsv1.Deployment](t, objs, filepath.Join("gateway", "epp.yaml"))
	found := 0
	for _, a := range epp.Spec.Template.Spec.Containers[0].Args {
		k, v, ok := strings.Cut(a, "=")
		if !ok || !strings.HasSuffix(k, "-metric") {
			continue
		}
		if k == "--lora-info-metric" && v == "" {
			continue // off: weft serves no LoRA adapters
		}
		found++
		if !bytes.Contains(src, []byte(`"`+v+`"`)) {
			t.Errorf("%s names %s, which server/metrics.go does not export", k, v)
		}
	}
	if found != 4 {
		t.Errorf("%d metric flags, want 4 (queued, running, KV cache, cache config)", found)
	}
}
