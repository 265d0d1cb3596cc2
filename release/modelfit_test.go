package release_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/release/preflight/modelfit"
)

// TestDeployModelFit: a model that cannot fit its GPUs is refused before
// the lock, with nothing applied and no record written (exit code 2);
// --skip-preflight deploys it; an unconfigured source checks nothing.
func TestDeployModelFit(t *testing.T) {
	spec := func() release.DeployOptions {
		s := baseSpec()
		s.args = []string{"--model=meta-llama/Llama-3.3-70B-Instruct"}
		opts := s.options()
		opts.Render.Options.SetString = append(opts.Render.Options.SetString, "modelFit.gpuMemoryMiB=81920")
		opts.ModelFit = modelfit.Source{File: "../testdata/modelfit/configs/meta-llama--Llama-3.3-70B-Instruct.json"}
		return opts
	}
	t.Run("refused", func(t *testing.T) {
		f := newEngFixture(t)
		res, err := f.engine.Deploy(context.Background(), spec())
		require.Error(t, err)
		assert.Nil(t, res)
		assert.Equal(t, 2, exitCode(err))
		var fe *modelfit.Error
		require.ErrorAs(t, err, &fe)
		assert.Equal(t, "gpu-oom", fe.Refused[0].Cause)
		assert.Equal(t, "modelFit.gpuMemoryMiB 81920", fe.Refused[0].GPUMemoryFrom)
		assert.Empty(t, f.cluster.Refs(), "nothing applied")
		assert.Empty(t, f.statuses(t), "no record")
	})
	t.Run("dry run refused too", func(t *testing.T) {
		f := newEngFixture(t)
		opts := spec()
		opts.DryRun = true
		_, err := f.engine.Deploy(context.Background(), opts)
		assert.Equal(t, 2, exitCode(err))
	})
	t.Run("--skip-preflight deploys", func(t *testing.T) {
		f := newEngFixture(t)
		opts := spec()
		opts.SkipPreflight = true
		res, err := f.engine.Deploy(context.Background(), opts)
		require.NoError(t, err)
		assert.NotNil(t, res)
	})
	t.Run("no source configured: no check", func(t *testing.T) {
		f := newEngFixture(t)
		opts := spec()
		opts.ModelFit = modelfit.Source{}
		_, err := f.engine.Deploy(context.Background(), opts)
		require.NoError(t, err)
	})
}

// TestGPUMemoryOverrideBounds: modelFit.gpuMemoryMiB outside 1..16 TiB
// (1e308, negative, NaN) is ignored as unset, never converted into a
// nonsense int64.
func TestGPUMemoryOverrideBounds(t *testing.T) {
	for v, want := range map[any]int64{81920: 81920, int64(24576): 24576, 81920.0: 81920, "40960": 40960,
		1e308: 0, -1.0: 0, "NaN": 0, "1e30": 0, "x": 0, true: 0} {
		assert.Equal(t, want, release.GPUMemoryOverride(map[string]any{"modelFit": map[string]any{"gpuMemoryMiB": v}}), "%v", v)
	}
}

// TestDeployListsNodesOnce: the model-fit check and the capacity
// preflight of one deploy share one LIST of the nodes.
func TestDeployListsNodesOnce(t *testing.T) {
	f := newEngFixture(t)
	s := baseSpec()
	s.args = []string{"--model=meta-llama/Llama-3.1-8B"}
	opts := s.options()
	opts.ModelFit = modelfit.Source{File: "../testdata/modelfit/configs/meta-llama--Llama-3.1-8B.json"}
	f.cluster.Client.ClearActions()
	_, err := f.engine.Deploy(context.Background(), opts)
	require.NoError(t, err)
	lists := 0
	for _, a := range f.cluster.Client.Actions() {
		if a.GetResource().Resource == "nodes" && a.GetVerb() == "list" {
			lists++
		}
	}
	assert.Equal(t, 1, lists)
}

// TestDeployResultModelFit: the deploy's result document carries the
// model-fit report (modelFit): the verdict and numbers of each vLLM
// server, or why it was skipped; none when no check ran.
func TestDeployResultModelFit(t *testing.T) {
	spec := func(config string) release.DeployOptions {
		s := baseSpec()
		s.args = []string{"--model=meta-llama/Llama-3.1-8B", "--max-model-len=8192"}
		opts := s.options()
		opts.Render.Options.SetString = append(opts.Render.Options.SetString, "modelFit.gpuMemoryMiB=81920")
		opts.ModelFit = modelfit.Source{File: config}
		return opts
	}
	t.Run("fits: the numbers", func(t *testing.T) {
		f := newEngFixture(t)
		res, err := f.engine.Deploy(context.Background(), spec("../testdata/modelfit/configs/meta-llama--Llama-3.1-8B.json"))
		require.NoError(t, err)
		require.NotNil(t, res.ModelFit)
		require.Len(t, res.ModelFit.Servers, 1)
		s := res.ModelFit.Servers[0]
		assert.Equal(t, "meta-llama/Llama-3.1-8B", s.Model)
		require.NotNil(t, s.Fit)
		assert.Equal(t, modelfit.VerdictFits, s.Fit.Verdict)
		assert.Equal(t, int64(8192), s.Fit.MaxModelLen)
		assert.InDelta(t, 80.0, s.Fit.GPUMemoryGiB, 0.01)
		assert.Greater(t, s.Fit.WeightsGiB, 14.0)
		assert.Empty(t, s.Cause)

		data, err := json.Marshal(res)
		require.NoError(t, err)
		var doc map[string]any
		require.NoError(t, json.Unmarshal(data, &doc))
		mf, ok := doc["modelFit"].(map[string]any)
		require.True(t, ok, "modelFit in the result document: %s", data)
		servers, _ := mf["servers"].([]any)
		require.Len(t, servers, 1)
		assert.Equal(t, "fits", servers[0].(map[string]any)["fit"].(map[string]any)["verdict"])
	})
	t.Run("skipped: why", func(t *testing.T) {
		f := newEngFixture(t)
		res, err := f.engine.Deploy(context.Background(), spec("../testdata/modelfit/configs/no-such-config.json"))
		require.NoError(t, err)
		require.NotNil(t, res.ModelFit)
		require.Len(t, res.ModelFit.Servers, 1)
		assert.Nil(t, res.ModelFit.Servers[0].Fit)
		assert.Contains(t, res.ModelFit.Servers[0].Skipped, "no-such-config.json")
	})
	t.Run("no check: no report", func(t *testing.T) {
		f := newEngFixture(t)
		res, err := f.engine.Deploy(context.Background(), spec(""))
		require.NoError(t, err)
		assert.Nil(t, res.ModelFit)
		data, err := json.Marshal(res)
		require.NoError(t, err)
		assert.NotContains(t, string(data), `"modelFit"`)
	})
}
