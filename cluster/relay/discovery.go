package relay

import (
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
)

// The subresources served, as discovery lists them. The API server
// authorizes a proxied request by its HTTP method (GET: get, POST:
// create); exec's streams come by POST (SPDY) or GET (WebSocket).
const (
	subLog  = "log"
	subRun  = "run"
	subExec = "exec"
)

var groupVersion = metav1.GroupVersionForDiscovery{GroupVersion: Group + "/" + Version, Version: Version}

func apiGroup() metav1.APIGroup {
	return metav1.APIGroup{
		TypeMeta: metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"},
		Name:     Group, Versions: []metav1.GroupVersionForDiscovery{groupVersion}, PreferredVersion: groupVersion,
	}
}

// APIResources is what /apis/GROUP/VERSION lists: subresources of the
// hosting API's Instances, with no resource of their own.
func APIResources() []metav1.APIResource {
	res := func(sub string, verbs ...string) metav1.APIResource {
		return metav1.APIResource{
			Name: resourceInstances + "/" + sub, Namespaced: true, Verbs: verbs,
			Group: v1.GroupVersion.Group, Version: v1.GroupVersion.Version, Kind: "Instance",
		}
	}
	return []metav1.APIResource{
		res(subLog, "get"),
		res(subRun, "get", "create"),
		res(subExec, "get", "create"),
	}
}

func (s *Server) serveGroupList(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, metav1.APIGroupList{
		TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"},
		Groups:   []metav1.APIGroup{apiGroup()},
	})
}

func (s *Server) serveGroup(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, apiGroup())
}

func (s *Server) serveResources(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, metav1.APIResourceList{
		TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: groupVersion.GroupVersion, APIResources: APIResources(),
	})
}
