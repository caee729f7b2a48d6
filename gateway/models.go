package gateway

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/tollgate-dev/tollgate/gateway/provider"
)

// model is OpenAI's model object.
type model struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

// listModels serves GET /v1/models: the model table, as far as the key
// may use it.
func (s *Server) listModels(w http.ResponseWriter, r *http.Request) {
	out := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list", Data: []model{}}
	for _, m := range s.cfg.Models {
		if rt, err := s.routes.resolve(m.Name); err == nil && allowedModel(keyOf(r), m.Name, rt) {
			out.Data = append(out.Data, model{ID: m.Name, Object: "model", OwnedBy: m.Deployments[0].Provider})
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// getModel serves GET /v1/models/{id}: a model of the table, or a
// "provider/model" name a configured provider serves (see checkPrefix);
// 404 otherwise.
func (s *Server) getModel(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "*")
	rt, err := s.routes.resolve(id)
	if err == nil && s.checkPrefix(keyOf(r), attempt{model: rt.model, dep: rt.deployments[0]}) != nil {
		err = errNoRoute // a name chat would refuse (402 unpriced_model) is not a model
	}
	if err != nil || strings.TrimSpace(id) == "" || !allowedModel(keyOf(r), id, rt) {
		chatErrors.WriteError(w, provider.Err(http.StatusNotFound, "invalid_request_error", "model_not_found",
			"the model "+id+" does not exist or you do not have access to it"))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(model{ID: id, Object: "model", OwnedBy: rt.provider.Name})
}
