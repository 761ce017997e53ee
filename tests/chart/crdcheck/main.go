// crdcheck validates Lockstep's CRDs and sample custom resources offline with
// the same code the kube-apiserver runs (k8s.io/apiextensions-apiserver):
//
//   - each CRD passes the API server's CRD validation: structural schema,
//     pruned and valid defaults, list/map types, CEL rules that compile and fit
//     the static cost budget;
//
//   - each sample custom resource is defaulted, pruned and validated (OpenAPI
//     schema and CEL rules) as on create, and the outcome is compared with the
//     sample's header comments:
//
//     # expect: valid
//     # expect-error: <substring of one reported error>     (repeatable)
//     # expect-field: spec.probe.intervalMs = 20            (JSON value after defaulting)
//
// Usage: crdcheck [-samples DIR] CRD.yaml...
// Prints one line per check and "N passed, N failed"; exits 1 on any failure.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structurallisttype "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	metavalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"
)

type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

func bufioReader(f *os.File) *bufio.Reader { return bufio.NewReader(f) }

// checkValuesSchema: the chart's values schema lists FabricPolicy.spec's
// top-level fields for defaultPolicy.spec; they must match the CRD.
func checkValuesSchema(path string, kinds map[string]*crdVersion) {
	data, err := os.ReadFile(path)
	if err != nil {
		fail("%s: %v", path, err)
		return
	}
	var doc struct {
		Properties struct {
			DefaultPolicy struct {
				Properties struct {
					Spec struct {
						PropertyNames struct {
							Enum []string `json:"enum"`
						} `json:"propertyNames"`
					} `json:"spec"`
				} `json:"properties"`
			} `json:"defaultPolicy"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		fail("%s: %v", path, err)
		return
	}
	cv := kinds["lockstep.dev/v1alpha1, Kind=FabricPolicy"]
	if cv == nil {
		fail("%s: FabricPolicy CRD not loaded", path)
		return
	}
	var want []string
	for k := range cv.structural.Properties["spec"].Properties {
		want = append(want, k)
	}
	got := append([]string(nil), doc.Properties.DefaultPolicy.Properties.Spec.PropertyNames.Enum...)
	sort.Strings(want)
	sort.Strings(got)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		fail("%s: defaultPolicy.spec.propertyNames.enum is %v but FabricPolicy.spec has %v; update values.schema.json", path, got, want)
		return
	}
	pass("%s: defaultPolicy.spec fields match FabricPolicy.spec", path)
}

type crdVersion struct {
	crdName    string
	scope      string
	structural *structuralschema.Structural
	validator  apiservervalidation.SchemaValidator
	cel        *cel.Validator
}

var (
	passed, failed int
)

func pass(format string, a ...any) {
	passed++
	fmt.Printf("PASS "+format+"\n", a...)
}

func fail(format string, a ...any) {
	failed++
	fmt.Printf("FAIL "+format+"\n", a...)
}

func main() {
	samples := flag.String("samples", "", "directory of sample custom resources (*.yaml)")
	var manifests stringList
	flag.Var(&manifests, "manifests", "rendered manifests to check (repeatable)")
	agentUser := flag.String("agent-user", "", "agent service account user name, to test ValidatingAdmissionPolicies with")
	valuesSchema := flag.String("values-schema", "", "chart values.schema.json whose defaultPolicy.spec keys must match FabricPolicy.spec")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: crdcheck [-samples DIR] CRD.yaml...")
		os.Exit(2)
	}

	scheme := runtime.NewScheme()
	if err := apiextensions.AddToScheme(scheme); err != nil {
		panic(err)
	}
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		panic(err)
	}

	kinds := map[string]*crdVersion{} // "group/version, Kind=X"
	for _, path := range flag.Args() {
		checkCRD(scheme, path, kinds)
	}
	if *samples != "" {
		files, _ := filepath.Glob(filepath.Join(*samples, "*.yaml"))
		sort.Strings(files)
		if len(files) == 0 {
			fail("%s: no samples found", *samples)
		}
		for _, f := range files {
			checkSample(f, kinds)
		}
	}
	for _, m := range manifests {
		checkManifests(m, kinds, *agentUser)
	}
	if *valuesSchema != "" {
		checkValuesSchema(*valuesSchema, kinds)
	}
	fmt.Printf("%d passed, %d failed\n", passed, failed)
	if failed > 0 {
		os.Exit(1)
	}
}

func checkCRD(scheme *runtime.Scheme, path string, kinds map[string]*crdVersion) {
	data, err := os.ReadFile(path)
	if err != nil {
		fail("%s: %v", path, err)
		return
	}
	var v1crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(data, &v1crd); err != nil {
		fail("%s: not a valid CustomResourceDefinition: %v", path, err)
		return
	}
	scheme.Default(&v1crd)
	var crd apiextensions.CustomResourceDefinition
	if err := scheme.Convert(&v1crd, &crd, nil); err != nil {
		fail("%s: convert: %v", path, err)
		return
	}
	// The API server records the storage version on create before validating.
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			crd.Status.StoredVersions = append(crd.Status.StoredVersions, v.Name)
		}
	}
	errs := crdvalidation.ValidateCustomResourceDefinition(context.Background(), &crd)
	if len(errs) > 0 {
		for _, e := range errs {
			fail("%s: %v", path, e)
		}
		return
	}
	pass("%s: CRD %s is valid (structural, defaults, CEL compile and cost)", path, crd.Name)

	for _, v := range crd.Spec.Versions {
		schema := v.Schema
		if schema == nil {
			schema = crd.Spec.Validation
		}
		s, err := structuralschema.NewStructural(schema.OpenAPIV3Schema)
		if err != nil {
			fail("%s: structural: %v", path, err)
			continue
		}
		validator, _, err := apiservervalidation.NewSchemaValidator(schema.OpenAPIV3Schema)
		if err != nil {
			fail("%s: schema validator: %v", path, err)
			continue
		}
		key := crd.Spec.Group + "/" + v.Name + ", Kind=" + crd.Spec.Names.Kind
		kinds[key] = &crdVersion{
			crdName:    crd.Name,
			scope:      string(crd.Spec.Scope),
			structural: s,
			validator:  validator,
			cel:        cel.NewValidator(s, true, celconfig.PerCallLimit),
		}
	}
}

var headerRe = regexp.MustCompile(`^#\s*(expect|expect-error|expect-field):\s*(.*?)\s*$`)

func checkSample(path string, kinds map[string]*crdVersion) {
	data, err := os.ReadFile(path)
	if err != nil {
		fail("%s: %v", path, err)
		return
	}
	name := filepath.Base(path)
	var wantValid bool
	var wantErrors []string
	var wantFields [][2]string
	for _, line := range strings.Split(string(data), "\n") {
		m := headerRe.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		switch m[1] {
		case "expect":
			wantValid = m[2] == "valid"
		case "expect-error":
			wantErrors = append(wantErrors, m[2])
		case "expect-field":
			kv := strings.SplitN(m[2], "=", 2)
			if len(kv) != 2 {
				fail("%s: bad expect-field %q (want path = json)", name, m[2])
				return
			}
			wantFields = append(wantFields, [2]string{strings.TrimSpace(kv[0]), strings.TrimSpace(kv[1])})
		}
	}
	if !wantValid && len(wantErrors) == 0 {
		fail("%s: no '# expect: valid' or '# expect-error:' header", name)
		return
	}

	// Decode as the API server does: integers stay int64, not float64.
	jsonData, err := yaml.YAMLToJSON(data)
	if err != nil {
		fail("%s: yaml: %v", name, err)
		return
	}
	var obj map[string]any
	if err := utiljson.Unmarshal(jsonData, &obj); err != nil {
		fail("%s: json: %v", name, err)
		return
	}
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	cv := kinds[apiVersion+", Kind="+kind]
	if cv == nil {
		fail("%s: no CRD serves %s %s", name, apiVersion, kind)
		return
	}

	got := validateCR(obj, cv)
	for _, g := range got {
		if strings.Contains(g, "evaluating rule") || strings.Contains(g, "no such key") {
			fail("%s: a CEL rule failed to evaluate (a bug in the rule): %s", name, g)
			return
		}
	}
	switch {
	case wantValid && len(got) > 0:
		fail("%s: expected valid, got %d error(s):\n    %s", name, len(got), strings.Join(got, "\n    "))
		return
	case !wantValid:
		if len(got) == 0 {
			fail("%s: expected errors %q, got none", name, wantErrors)
			return
		}
		for _, w := range wantErrors {
			found := false
			for _, g := range got {
				if strings.Contains(g, w) {
					found = true
				}
			}
			if !found {
				fail("%s: expected an error containing %q, got:\n    %s", name, w, strings.Join(got, "\n    "))
				return
			}
		}
	}
	for _, f := range wantFields {
		val, ok := lookup(obj, f[0])
		if !ok {
			fail("%s: field %s missing after defaulting (want %s)", name, f[0], f[1])
			return
		}
		gotJSON, _ := json.Marshal(val)
		var want any
		if err := json.Unmarshal([]byte(f[1]), &want); err != nil {
			fail("%s: expect-field %s: value %q is not JSON", name, f[0], f[1])
			return
		}
		wantJSON, _ := json.Marshal(want)
		if !bytes.Equal(gotJSON, wantJSON) {
			fail("%s: field %s = %s, want %s", name, f[0], gotJSON, wantJSON)
			return
		}
	}
	if wantValid {
		pass("%s: valid as expected (%d field check(s))", name, len(wantFields))
	} else {
		pass("%s: rejected as expected: %s", name, strings.Join(got, " | "))
	}
}

// validateCR does what the API server does on create
// (registry/customresource): prune unknown fields, apply defaults, validate
// metadata, the OpenAPI schema and list-type invariants, then the CEL rules
// unless an earlier error blocks them. obj is modified (pruned, defaulted).
func validateCR(obj map[string]any, cv *crdVersion) []string {
	structuralpruning.Prune(obj, cv.structural, true)
	structuraldefaulting.Default(obj, cv.structural)
	u := &unstructured.Unstructured{Object: obj}
	var errs field.ErrorList
	errs = append(errs, metavalidation.ValidateObjectMetaAccessor(u, cv.scope == "Namespaced", metavalidation.NameIsDNSSubdomain, field.NewPath("metadata"))...)
	errs = append(errs, apiservervalidation.ValidateCustomResource(nil, obj, cv.validator)...)
	errs = append(errs, schemaobjectmeta.Validate(nil, obj, cv.structural, false)...)
	errs = append(errs, structurallisttype.ValidateListSetsAndMaps(nil, cv.structural, obj)...)
	if blocked := hasBlockingErr(errs); blocked != nil {
		errs = append(errs, blocked)
	} else {
		celErrs, _ := cv.cel.Validate(context.Background(), nil, cv.structural, obj, nil, celconfig.RuntimeCELCostBudget)
		errs = append(errs, celErrs...)
	}
	var got []string
	for _, e := range errs {
		got = append(got, e.Error())
	}
	return got
}

// hasBlockingErr mirrors registry/customresource: these error types stop the
// CEL rules from running.
func hasBlockingErr(errs field.ErrorList) *field.Error {
	for _, err := range errs {
		switch err.Type {
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong, field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			return field.Invalid(nil, nil, "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation")
		}
	}
	return nil
}

// lookup follows a dotted path with optional [N] list indexes, e.g.
// spec.tolerations[0].key. Map keys containing dots can be quoted: spec.a["b.c"].
func lookup(obj any, path string) (any, bool) {
	cur := obj
	for _, tok := range tokenize(path) {
		if idx, err := strconv.Atoi(tok); err == nil {
			if l, ok := cur.([]any); ok {
				if idx < 0 || idx >= len(l) {
					return nil, false
				}
				cur = l[idx]
				continue
			}
		}
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		cur, ok = m[tok]
		if !ok {
			return nil, false
		}
	}
	return cur, true
}

func tokenize(path string) []string {
	var toks []string
	var b strings.Builder
	flush := func() {
		if b.Len() > 0 {
			toks = append(toks, b.String())
			b.Reset()
		}
	}
	for i := 0; i < len(path); i++ {
		c := path[i]
		switch {
		case c == '.':
			flush()
		case c == '[':
			flush()
			j := strings.IndexByte(path[i:], ']')
			if j < 0 {
				return append(toks, path[i:])
			}
			inner := path[i+1 : i+j]
			toks = append(toks, strings.Trim(inner, `"`))
			i += j
		default:
			b.WriteByte(c)
		}
	}
	flush()
	return toks
}
