package deps

import (
	_ "github.com/spf13/cobra"
	_ "github.com/spf13/viper"
	_ "github.com/stretchr/testify/require"
	_ "helm.sh/helm/v4/pkg/chart/common/util"
	_ "helm.sh/helm/v4/pkg/chart/v2/loader"
	_ "helm.sh/helm/v4/pkg/engine"
	_ "helm.sh/helm/v4/pkg/strvals"
	_ "k8s.io/cli-runtime/pkg/genericclioptions"
	_ "k8s.io/client-go/kubernetes"
	_ "k8s.io/kubectl/pkg/util"
	_ "sigs.k8s.io/cli-utils/pkg/kstatus/watcher"
)
