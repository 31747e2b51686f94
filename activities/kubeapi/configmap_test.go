package kubeapi

import (
	"context"
	"errors"
	"testing"

	"go.temporal.io/sdk/temporal"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kedge.dev/kedge/actions/kube"

	"kedge.dev/kedge/actions/errtype"
)

func TestSetConfigMapDataChangesOneKey(t *testing.T) {
	a, cs := fakeActs()
	ctx := context.Background()
	if _, err := cs.CoreV1().ConfigMaps("kube-system").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "coredns", Namespace: "kube-system"},
		Data: map[string]string{"Corefile": typhoonCorefile, "other": "kept"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	in := kube.SetConfigMapDataInput{Name: "coredns", Key: "Corefile", Value: ".:53 {\n    errors\n}\n"}
	res, err := a.SetConfigMapData(ctx, in)
	if err != nil || !res.Present || !res.Changed || res.Previous != typhoonCorefile {
		t.Fatalf("%+v %v", res, err)
	}
	cm, _ := cs.CoreV1().ConfigMaps("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
	if cm.Data["Corefile"] != in.Value || cm.Data["other"] != "kept" {
		t.Errorf("the ConfigMap after: %q", cm.Data)
	}
	// Again: nothing to change. The undo: the previous value back.
	if res, err := a.SetConfigMapData(ctx, in); err != nil || res.Changed || res.Previous != in.Value {
		t.Errorf("again: %+v %v", res, err)
	}
	if _, err := a.SetConfigMapData(ctx, kube.SetConfigMapDataInput{Name: "coredns", Key: "Corefile", Value: typhoonCorefile}); err != nil {
		t.Fatal(err)
	}
	if cm, _ := cs.CoreV1().ConfigMaps("kube-system").Get(ctx, "coredns", metav1.GetOptions{}); cm.Data["Corefile"] != typhoonCorefile {
		t.Errorf("undone: %q", cm.Data["Corefile"])
	}
	// No such ConfigMap: nothing done, no error.
	if res, err := a.SetConfigMapData(ctx, kube.SetConfigMapDataInput{Name: "none", Key: "Corefile", Value: "x"}); err != nil || res.Present {
		t.Errorf("absent: %+v %v", res, err)
	}
	for _, bad := range []kube.SetConfigMapDataInput{
		{Name: "coredns", Key: "../x", Value: "x"},
		{Name: "Bad_Name", Key: "Corefile", Value: "x"},
		{Name: "coredns", Key: "Corefile"},
	} {
		_, err := a.SetConfigMapData(ctx, bad)
		var app *temporal.ApplicationError
		if !errors.As(err, &app) || !errtype.Is(err, errtype.InvalidInput) || !app.NonRetryable() {
			t.Errorf("%+v: %v", bad, err)
		}
	}
}
