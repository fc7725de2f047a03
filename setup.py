"""Packaging for bpe_nb; every setting lives in settings.ini (nbdev 2 layout), edit it there, not here.

This is nbdev 2's template `setup.py`, mended for today's setuptools: no `pkg_resources` (gone in
setuptools 80+), the status classifier indexed correctly, and an SPDX licence instead of the
deprecated licence classifiers.
"""
from configparser import ConfigParser
import setuptools, shlex

config = ConfigParser(delimiters=['='])
config.read('settings.ini', encoding='utf-8')
cfg = config['DEFAULT']

cfg_keys = 'version description keywords author author_email'.split()
expected = cfg_keys + "lib_name user branch license status min_python audience language".split()
for o in expected: assert o in cfg, "missing expected setting: {}".format(o)
setup_cfg = {o: cfg[o] for o in cfg_keys}

licenses = {'apache2': 'Apache-2.0', 'mit': 'MIT', 'bsd3': 'BSD-3-Clause', 'gpl2': 'GPL-2.0-only', 'gpl3': 'GPL-3.0-only'}
statuses = ['1 - Planning', '2 - Pre-Alpha', '3 - Alpha', '4 - Beta', '5 - Production/Stable', '6 - Mature', '7 - Inactive']
py_versions = '3.10 3.11 3.12 3.13 3.14'.split()

requirements = shlex.split(cfg.get('requirements', ''))
if cfg.get('pip_requirements'): requirements += shlex.split(cfg.get('pip_requirements', ''))
min_python = cfg['min_python']
dev_requirements = (cfg.get('dev_requirements') or '').split()
plot_requirements = (cfg.get('plot_requirements') or '').split()

package_data = dict()
pkg_data = cfg.get('package_data', None)
if pkg_data: package_data[cfg['lib_name']] = pkg_data.split()
setup_cfg['package_data'] = package_data

setuptools.setup(
    name=cfg['lib_name'],
    license=licenses.get(cfg['license'].lower(), cfg['license']),
    classifiers=[
        'Development Status :: ' + statuses[int(cfg['status']) - 1],
        'Intended Audience :: ' + cfg['audience'].title(),
        'Natural Language :: ' + cfg['language'].title(),
    ] + ['Programming Language :: Python :: ' + o for o in py_versions[py_versions.index(min_python):]],
    url=cfg['git_url'],
    packages=setuptools.find_packages(include=[cfg['lib_name'], cfg['lib_name'] + '.*']),
    include_package_data=True,
    install_requires=requirements,
    extras_require={'dev': dev_requirements, 'plot': plot_requirements},
    dependency_links=cfg.get('dep_links', '').split(),
    python_requires='>=' + cfg['min_python'],
    long_description=open('README.md', encoding='utf-8').read(),
    long_description_content_type='text/markdown',
    zip_safe=False,
    entry_points={
        'console_scripts': cfg.get('console_scripts', '').split(),
        'nbdev': [f'{cfg.get("lib_path")}={cfg.get("lib_path")}._modidx:d'],
    },
    **setup_cfg)
