package simulator

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"
)

// FuzzAdminFaultJSON feeds any body to the admin API's fault decoders. A
// body is refused with a 400, or gives faults that pass their own check,
// belong to the call's organization, and read back the same from the JSON
// the admin API answers with (compared as that JSON: an empty list and
// none are the same answer).
func FuzzAdminFaultJSON(f *testing.F) {
	for _, seed := range []string{
		`{"op":"getSandbox","status":503,"times":2,"after":1}`,
		`[{"op":"createSandbox","status":429,"retryAfter":7},{"op":"toolbox","delay":"1.5s"}]`,
		`{"op":"startSandbox","failStart":"runner lost","recoverable":true}`,
		`{"op":"*","vanish":true,"sandbox":"x","org":"org-b"}`,
		`{"op":"getSandbox","delay":250}`, `{"op":"getsandbox","status":500}`, `{"status":500}`,
		`{"op":"getSandbox","status":200}`, `{"op":"getSandbox","status":500,"extra":1}`, `[]`, `{} {}`,
		`{"seed":7,"rate":0.5,"ops":["listSandboxes"],"outcomes":[{"status":418}]}`,
		`{"rate":2}`, `{"op":"getSandbox","delay":-1}`, `{"op":"getSandbox","delay":1e300}`,
	} {
		f.Add([]byte(seed))
	}
	scopes := []scope{everyOrg, {org: "org-a"}}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, sc := range scopes {
			checkDecodedFaults(t, body, sc)
		}
		checkDecodedRandomFaults(t, body)
	})
}

func checkDecodedFaults(t *testing.T, body []byte, sc scope) {
	list, aerr := decodeFaults(body, sc)
	if aerr != nil {
		if aerr.Status != http.StatusBadRequest {
			t.Fatalf("refused with %d, not 400: %s", aerr.Status, aerr.Message)
		}
		return
	}
	for _, ft := range list {
		if err := ft.Check(faultOps()); err != nil {
			t.Fatalf("accepted %+v, which fails its check: %v", ft, err)
		}
		if !sc.all && ft.Org != sc.org {
			t.Fatalf("a call of %s added a fault of %q", sc.org, ft.Org)
		}
	}
	b, err := json.Marshal(list)
	if err != nil {
		t.Fatalf("the faults %+v do not encode: %v", list, err)
	}
	again, aerr := decodeFaults(b, sc)
	if aerr != nil {
		t.Fatalf("the admin API's own answer %s is refused: %s", b, aerr.Message)
	}
	if b2, _ := json.Marshal(again); !bytes.Equal(b2, b) {
		t.Fatalf("%s reads back as %s", b, b2)
	}
}

func checkDecodedRandomFaults(t *testing.T, body []byte) {
	rf, aerr := decodeRandomFaults(body)
	if aerr != nil {
		return
	}
	if err := rf.Check(faultOps()); err != nil {
		t.Fatalf("accepted %+v, which fails its check: %v", rf, err)
	}
	b, err := json.Marshal(rf)
	if err != nil {
		t.Fatalf("%+v does not encode: %v", rf, err)
	}
	again, aerr := decodeRandomFaults(b)
	if aerr != nil {
		t.Fatalf("the admin API's own answer %s is refused: %s", b, aerr.Message)
	}
	if b2, _ := json.Marshal(again); !bytes.Equal(b2, b) {
		t.Fatalf("%s reads back as %s", b, b2)
	}
}
