package main

// Checks of rendered chart manifests (helm template output):
//   - built-in kinds decode strictly into their client-go types (an unknown or
//     misspelt field fails);
//   - lockstep.dev objects (the default FabricPolicy) pass their CRD's
//     validation after defaulting, as on create;
//   - ValidatingAdmissionPolicies compile with the API server's CEL compiler
//     and behave as intended for the agent (own node allowed, other node and
//     tokens without node info denied, other users not matched).

import (
	"context"
	"fmt"
	"os"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"
	clientscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

const nodeNameExtra = "authentication.kubernetes.io/node-name"

func checkManifests(path string, kinds map[string]*crdVersion, agentUser string) {
	f, err := os.Open(path)
	if err != nil {
		fail("%s: %v", path, err)
		return
	}
	defer f.Close()
	reader := utilyaml.NewYAMLReader(bufioReader(f))
	n := 0
	for {
		doc, err := reader.Read()
		if err != nil {
			break
		}
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(doc, &head); err != nil {
			fail("%s: document %d: %v", path, n, err)
			continue
		}
		if head.Kind == "" {
			continue // comment-only document
		}
		n++
		what := fmt.Sprintf("%s: %s %s/%s", path, head.APIVersion, head.Kind, head.Metadata.Name)
		gv, err := schema.ParseGroupVersion(head.APIVersion)
		if err != nil {
			fail("%s: %v", what, err)
			continue
		}
		gvk := gv.WithKind(head.Kind)
		switch {
		case gv.Group == "lockstep.dev":
			cv := kinds[head.APIVersion+", Kind="+head.Kind]
			if cv == nil {
				fail("%s: no CRD serves it", what)
				continue
			}
			obj, err := decodeUnstructured(doc)
			if err != nil {
				fail("%s: %v", what, err)
				continue
			}
			if errs := validateCR(obj, cv); len(errs) > 0 {
				fail("%s: rejected by its CRD:\n    %s", what, strings.Join(errs, "\n    "))
				continue
			}
			pass("%s: valid against its CRD", what)
		case gv.Group == "monitoring.coreos.com":
			// prometheus-operator types are not vendored; check it is well-formed YAML only.
			pass("%s: parsed (no schema available offline)", what)
		default:
			obj, err := clientscheme.Scheme.New(gvk)
			if err != nil {
				fail("%s: unknown built-in kind: %v", what, err)
				continue
			}
			if err := yaml.UnmarshalStrict(doc, obj); err != nil {
				fail("%s: %v", what, err)
				continue
			}
			pass("%s: decodes strictly", what)
			if vap, ok := obj.(*admissionregistrationv1.ValidatingAdmissionPolicy); ok {
				checkAgentPolicy(what, vap, agentUser)
			}
		}
	}
	if n == 0 {
		fail("%s: no manifests", path)
	}
}

func decodeUnstructured(doc []byte) (map[string]any, error) {
	u := &unstructured.Unstructured{}
	jsonData, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return nil, err
	}
	if err := u.UnmarshalJSON(jsonData); err != nil {
		return nil, err
	}
	return u.Object, nil
}

// checkAgentPolicy compiles the policy like the API server's
// ValidatingAdmissionPolicy plugin and runs the agent scenarios.
func checkAgentPolicy(what string, policy *admissionregistrationv1.ValidatingAdmissionPolicy, agentUser string) {
	envTemplate, err := plugincel.NewCompositionEnv(plugincel.VariablesTypeName, environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion(), true))
	if err != nil {
		fail("%s: CEL environment: %v", what, err)
		return
	}
	compiler := plugincel.NewCompositedCompilerFromTemplate(envTemplate)
	opts := plugincel.OptionalVariableDeclarations{HasParams: policy.Spec.ParamKind != nil, HasAuthorizer: true, StrictCost: true}
	msgOpts := plugincel.OptionalVariableDeclarations{HasParams: policy.Spec.ParamKind != nil, StrictCost: true}

	var matchAccessors []plugincel.ExpressionAccessor
	for i := range policy.Spec.MatchConditions {
		matchAccessors = append(matchAccessors, (*matchconditions.MatchCondition)(&policy.Spec.MatchConditions[i]))
	}
	var validations, messages []plugincel.ExpressionAccessor
	for _, v := range policy.Spec.Validations {
		validations = append(validations, &validating.ValidationCondition{Expression: v.Expression, Message: v.Message, Reason: v.Reason})
		if v.MessageExpression != "" {
			messages = append(messages, &validating.MessageExpressionCondition{MessageExpression: v.MessageExpression})
		} else {
			messages = append(messages, nil)
		}
	}
	matchEval := compiler.CompileCondition(matchAccessors, opts, environment.StoredExpressions)
	validationEval := compiler.CompileCondition(validations, opts, environment.StoredExpressions)
	messageEval := compiler.CompileCondition(messages, msgOpts, environment.StoredExpressions)
	var compileErrs []string
	for _, e := range [][]error{matchEval.CompilationErrors(), validationEval.CompilationErrors(), messageEval.CompilationErrors()} {
		for _, err := range e {
			compileErrs = append(compileErrs, err.Error())
		}
	}
	if len(compileErrs) > 0 {
		fail("%s: CEL does not compile:\n    %s", what, strings.Join(compileErrs, "\n    "))
		return
	}
	pass("%s: CEL compiles", what)
	if agentUser == "" {
		return
	}

	matcher := matchconditions.NewMatcher(matchEval, policy.Spec.FailurePolicy, "policy", "validate", policy.Name)
	auditEval := compiler.CompileCondition(nil, opts, environment.StoredExpressions)
	validator := validating.NewValidator(validationEval, matcher, auditEval, messageEval, policy.Spec.FailurePolicy)

	type scenario struct {
		name      string
		user      user.Info
		object    string
		wantDeny  bool
		wantInMsg string
	}
	// The FabricHealth policy names the object after the node; the NodeAudit
	// policy reads the object's spec.nodeName (named <audit>.<node>).
	nodeAudits := false
	if mc := policy.Spec.MatchConstraints; mc != nil {
		for _, r := range mc.ResourceRules {
			for _, res := range r.Resources {
				if res == "nodeaudits" || res == "nodeaudits/status" {
					nodeAudits = true
				}
			}
		}
	}
	otherMsg := "may only write FabricHealth gpu-1, not gpu-2"
	if nodeAudits {
		otherMsg = "may only write its own node's NodeAudits, not a.gpu-2"
	}
	agentOn := func(node string) user.Info {
		return &user.DefaultInfo{Name: agentUser, Extra: map[string][]string{nodeNameExtra: {node}}}
	}
	scenarios := []scenario{
		{"agent updates its own node's FabricHealth", agentOn("gpu-1"), "gpu-1", false, ""},
		{"agent updates another node's object", agentOn("gpu-1"), "gpu-2", true, otherMsg},
		{"agent token without node info", &user.DefaultInfo{Name: agentUser}, "gpu-2", true, "carries no node name"},
		{"agent token with other extras only", &user.DefaultInfo{Name: agentUser, Extra: map[string][]string{"authentication.kubernetes.io/credential-id": {"JTI=x"}}}, "gpu-2", true, "carries no node name"},
		{"agent token with an empty node name list", &user.DefaultInfo{Name: agentUser, Extra: map[string][]string{nodeNameExtra: {}}}, "gpu-2", true, "carries no node name"},
		{"operator updates any FabricHealth", &user.DefaultInfo{Name: "system:serviceaccount:lockstep:lockstep-operator"}, "gpu-2", false, ""},
	}
	gvr := schema.GroupVersionResource{Group: "lockstep.dev", Version: "v1alpha1", Resource: "fabrichealths"}
	gvk := schema.GroupVersionKind{Group: "lockstep.dev", Version: "v1alpha1", Kind: "FabricHealth"}
	if nodeAudits {
		gvr.Resource, gvk.Kind = "nodeaudits", "NodeAudit"
	}
	for _, sc := range scenarios {
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "lockstep.dev/v1alpha1", "kind": "FabricHealth",
			"metadata": map[string]any{"name": sc.object},
			"status":   map[string]any{"phase": "Healthy", "nodeName": sc.object},
		}}
		name := sc.object
		if nodeAudits {
			name = "a." + sc.object
			obj = &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "lockstep.dev/v1alpha1", "kind": "NodeAudit",
				"metadata": map[string]any{"name": name},
				"spec":     map[string]any{"fleetAudit": "a", "nodeName": sc.object},
				"status":   map[string]any{"phase": "Completed"},
			}}
		}
		attrs := admission.NewAttributesRecord(obj, obj.DeepCopy(), gvk, "", name, gvr, "status", admission.Update, nil, false, sc.user)
		versioned := &admission.VersionedAttributes{Attributes: attrs, VersionedKind: gvk, VersionedObject: obj, VersionedOldObject: obj.DeepCopy()}
		res := validator.Validate(context.Background(), gvr, versioned, nil, nil, celconfig.RuntimeCELCostBudget, nil)
		denied := false
		var msgs []string
		for _, d := range res.Decisions {
			if d.Action == validating.ActionDeny {
				denied = true
			}
			msgs = append(msgs, fmt.Sprintf("%s: %s", d.Action, d.Message))
		}
		switch {
		case denied != sc.wantDeny:
			fail("%s: %s: denied=%v, want %v (%s)", what, sc.name, denied, sc.wantDeny, strings.Join(msgs, "; "))
		case sc.wantInMsg != "" && !strings.Contains(strings.Join(msgs, "; "), sc.wantInMsg):
			fail("%s: %s: message %q lacks %q", what, sc.name, strings.Join(msgs, "; "), sc.wantInMsg)
		default:
			pass("%s: %s: denied=%v as expected %s", what, sc.name, denied, strings.Join(msgs, "; "))
		}
	}
}
